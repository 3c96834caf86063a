# Plan-instance timing: several plans of one implementation, each replayed from its own CUDA graph,
# timed in alternation. torchrun --nproc-per-node W .carry/probe/instances.py
import os, random, statistics, sys
import torch, torch.distributed as dist
import tpgemm, tpgemm._torch as tt
C = tpgemm._C
local = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
W, rank = dist.get_world_size(), dist.get_rank()
team = tt.team_for_group(None)
M, N, K = [int(x) for x in os.environ.get("SHAPE", "16,1360,24").split(",")]
IT = 200
A = torch.randn(M // W, K, device="cuda", dtype=torch.bfloat16)
B = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
D = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
X = torch.randn(M * N, device="cuda", dtype=torch.bfloat16); Y = torch.empty_like(X)
items, keep = [], []
G = torch.empty(M, K, device="cuda", dtype=torch.bfloat16)
kinds = os.environ.get("KINDS", "ag,ar").split(",")
for i in range(int(os.environ.get("N", "6"))):
    if "ag" in kinds:
        p = C.Plan(team, "ag_gemm", M, N, K, impl="allgather_gemm")
        items.append((f"ag{i}", lambda s, p=p: p.run(A.data_ptr(), B.data_ptr(), 0, D.data_ptr(), 0, s)))
    if "ar" in kinds:
        q = C.AllReducePlan(team, M * N, "bf16", "oneshot")
        items.append((f"ar{i}", lambda s, q=q: q.run(X.data_ptr(), Y.data_ptr(), s)))
    if "agoff" in kinds:
        p = C.Plan(team, "ag_gemm", M, N, K, impl="allgather_gemm")
        off = int(os.environ.get("OFFS", "0,1024,2048,3072").split(",")[i % 4])
        Gb = torch.empty(1 << 20, device="cuda", dtype=torch.uint8); keep.append(Gb)
        base = (Gb.data_ptr() + 65535) // 65536 * 65536 + off
        items.append((f"go{off}", lambda s, p=p, base=base: p.run(A.data_ptr(), B.data_ptr(), 0, D.data_ptr(), base, s)))
    if "agsame" in kinds:
        p = C.Plan(team, "ag_gemm", M, N, K, impl="allgather_gemm")
        items.append((f"gs{i}", lambda s, p=p: p.run(A.data_ptr(), B.data_ptr(), 0, D.data_ptr(), G.data_ptr(), s)))
    if "mm" in kinds:
        Ag = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        items.append((f"mm{i}", lambda s, Ag=Ag: torch.mm(Ag, B.t(), out=D)))
    if i % 2 == 1 and "spacer" in kinds:
        keep.append(C.AllReducePlan(team, 4096 * (i + 1), "bf16", "oneshot"))
graphs = []
s = torch.cuda.Stream()
for name, fn in items:
    for _ in range(3): fn(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(IT): fn(s.cuda_stream)
    g.replay(); torch.cuda.synchronize()
    graphs.append(g)
rng = random.Random(1)
order = list(range(len(items)))
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
z = torch.zeros(1, device="cuda")
for ps in range(2):
    ts = [[] for _ in items]
    for r in range(int(os.environ.get("ROUNDS", "9"))):
        rng.shuffle(order)
        for i in order:
            dist.barrier(); torch.cuda._sleep(200_000); dist.all_reduce(z)
            e0.record(); graphs[i].replay(); e1.record(); e1.synchronize()
            ts[i].append(e0.elapsed_time(e1) / IT * 1000)
    med = torch.tensor([statistics.median(t) for t in ts], device="cuda")
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"W={W} shape={M},{N},{K} pass {ps}: " + " ".join(f"{n}={v:.2f}" for (n, _), v in zip(items, med.tolist())), flush=True)
dist.destroy_process_group()
