"""Host time per eager call of the op over L layers' weights in turn, the GPU held busy, CALLS per sample."""
import os, sys, time, statistics, itertools
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)
import torch, torch.distributed as dist
import tpgemm.ops
from tpgemm import _torch as T
from tpgemm.ops import _b_operand

def host_us(fn, calls, hold):
    fn(); torch.cuda.synchronize()
    out = []
    for _ in range(5):
        dist.barrier()
        if hold: torch.cuda._sleep(400_000_000)
        t0 = time.perf_counter()
        for _ in range(calls): fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    t = torch.tensor([statistics.median(out)], device="cuda"); dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()

local = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
W, g = dist.get_world_size(), dist.group.WORLD.group_name
M, N, K = 256, 4096, 4096
A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
Ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16) for _ in range(64)]
ops = torch.ops.tpgemm
B, layout = _b_operand(Ws[0].t())
p = T.plan(g, "gemm_rs", M, N, K, "bf16", layout, alpha=1.0, shard_dim="m")
if dist.get_rank() == 0: print("impl", p.impl, "graphs", os.environ.get("TPGEMM_CALL_GRAPHS"), flush=True)
for L in [1, 4, 8, 16, 32, 64]:
    for calls, hold in [(100, True), (20, True), (100, False)]:
        cyc = itertools.cycle(Ws[:L])
        us = host_us(lambda: ops.fused_matmul_reduce_scatter(A, next(cyc).t(), "sum", 0, g), calls, hold)
        if dist.get_rank() == 0: print(f"L={L:3d} calls={calls:3d} hold={hold:d}: {us:8.1f} us", flush=True)
for impl in ["pipelined_ce", "gemm_reducescatter", "fused"]:
    try:
        T.set_impl("gemm_rs", impl)
        cyc = itertools.cycle(Ws)
        us = host_us(lambda: ops.fused_matmul_reduce_scatter(A, next(cyc).t(), "sum", 0, g), 100, True)
        if dist.get_rank() == 0: print(f"impl={impl} L=64 calls=100 hold=1: {us:8.1f} us", flush=True)
    except Exception as e:
        if dist.get_rank() == 0: print(impl, "failed", e)
T.set_impl("gemm_rs", "auto")
dist.destroy_process_group()
