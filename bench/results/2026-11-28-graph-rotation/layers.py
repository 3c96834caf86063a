import os, time, statistics, itertools
import torch, torch.distributed as dist
import tpgemm.ops
local = int(os.environ.get("LOCAL_RANK", 0)); torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
W, g = dist.get_world_size(), dist.group.WORLD.group_name
ops = torch.ops.tpgemm
A = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
ws = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(64)]
from tpgemm import _torch as T
from tpgemm.ops import _b_operand
W = dist.get_world_size()
B0, layout = _b_operand(ws[0].t())
plan = T.plan(g, "gemm_rs", 256, 4096, 4096, "bf16", layout, alpha=1.0, shard_dim="m")
D = torch.empty(256 // W, 4096, device="cuda", dtype=torch.bfloat16)
st = T.stream()
bptr = [_b_operand(w.t())[0].data_ptr() for w in ws]
for what, L in [(w, L) for w in ("op", "plan.run") for L in (1, 2, 8, 64)]:
    cyc = itertools.cycle(ws[:L]); pcyc = itertools.cycle(bptr[:L])
    if what == "op":
        fn = lambda: ops.fused_matmul_reduce_scatter(A, next(cyc).t(), "sum", 0, g)
    else:
        fn = lambda: plan.run(A.data_ptr(), next(pcyc), 0, D.data_ptr(), 0, st)
    for _ in range(3 * L): fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(5):
        dist.barrier(); torch.cuda._sleep(400_000_000)
        t0 = time.perf_counter()
        for _ in range(128): fn()
        out.append((time.perf_counter() - t0) / 128 * 1e6); torch.cuda.synchronize()
    if dist.get_rank() == 0: print(f"{what} graphs={os.environ.get('TPGEMM_CALL_GRAPHS')} layers={L}: {statistics.median(out):.1f} us", flush=True)
dist.destroy_process_group()
