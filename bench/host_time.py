"""Host time of one eager call, layer by layer: the torch op (dispatcher and all), the Python
function behind it, the C++ Plan.run alone, the op called by each of a deep model's layers in
turn (weights of their own, one plan), a RowParallelLinear module (without and with autograd),
and the torch calls every op makes anyway (an empty output, the current stream), beside torch's
matmul + NCCL. The GPU is held busy (torch.cuda._sleep) while the calls are enqueued, so each
figure is the host's own cost, never a wait for the GPU. Each row also says how much device
memory its calls took outside torch's allocator (the CUDA graphs tpgemm keeps, NOTE [call graphs]).

    python3 -m torch.distributed.run --standalone --nproc-per-node W bench/host_time.py [--json F]
"""
import argparse
import itertools
import json
import os
import statistics
import time

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import tpgemm.ops  # noqa: E402,F401
from tpgemm import _torch as T  # noqa: E402
from tpgemm.nn import RowParallelLinear  # noqa: E402
from tpgemm.ops import _ar_kernel, _b_operand, _rs_kernel  # noqa: E402

CALLS = 100            # per sample: few enough that the launch queue never fills
LAYERS = 64            # a deep model's layers sharing one plan, each with its own weight
HOLD_CYCLES = 400_000_000  # about 0.2 s of GPU time ahead of the calls


def host_us(fn, samples=5):
    """Median over samples of the host time per call (us), the GPU held busy meanwhile; the
    slowest rank's."""
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        dist.barrier()
        torch.cuda._sleep(HOLD_CYCLES)
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        out.append((time.perf_counter() - t0) / CALLS * 1e6)
        torch.cuda.synchronize()
    t = torch.tensor([statistics.median(out)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    args = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    W, g = dist.get_world_size(), dist.group.WORLD.group_name
    M, N, K = args.m // W * W, args.n, args.k  # (gemm_rs scatters M: a multiple of W)
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    Wt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    ops = torch.ops.tpgemm
    B, layout = _b_operand(Wt.t())
    D = torch.empty(M // W, N, device="cuda", dtype=A.dtype)
    rs_plan = T.plan(g, "gemm_rs", M, N, K, "bf16", layout, alpha=1.0, shard_dim="m")
    stream = T.stream()
    a_ptr, b_ptr, d_ptr = A.data_ptr(), B.data_ptr(), D.data_ptr()
    a16 = A[:16]

    row_sp = RowParallelLinear(K * W, N, group=g, sequence_parallel=True)  # its weight: [N, K], this rank's
    row_ar = RowParallelLinear(K * W, N, group=g, sequence_parallel=False)
    x = A.clone().requires_grad_()

    def module_no_grad(m, a):
        with torch.no_grad():
            return m(a)

    layer_weights = itertools.cycle([torch.randn_like(Wt) for _ in range(LAYERS)])

    def next_layer():
        return ops.fused_matmul_reduce_scatter(A, next(layer_weights).t(), "sum", 0, g)

    def nccl_rs():
        p = A @ Wt.t()
        dist.reduce_scatter_tensor(torch.empty(M // W, N, device="cuda", dtype=A.dtype), p)

    rows = [
        ("gemm_rs: torch.ops.tpgemm.fused_matmul_reduce_scatter", lambda: ops.fused_matmul_reduce_scatter(A, Wt.t(), "sum", 0, g)),
        ("gemm_rs: the Python function behind it", lambda: _rs_kernel(A, Wt.t(), "sum", 0, g)),
        ("gemm_rs: Plan.run alone (C++ through nanobind)", lambda: rs_plan.plan.run(a_ptr, b_ptr, 0, d_ptr, 0, stream, M)),
        (f"gemm_rs: the torch op, {LAYERS} layers' weights in turn", next_layer),
        ("gemm_ar: torch.ops.tpgemm.matmul_all_reduce, M=16", lambda: ops.matmul_all_reduce(a16, Wt.t(), "sum", g)),
        ("gemm_ar: the Python function behind it, M=16", lambda: _ar_kernel(a16, Wt.t(), "sum", g)),
        ("RowParallelLinear (sequence parallel), no_grad", lambda: module_no_grad(row_sp, A)),
        ("RowParallelLinear (sequence parallel), with autograd", lambda: row_sp(x)),
        ("RowParallelLinear (all-reduce), no_grad, M=16", lambda: module_no_grad(row_ar, a16)),
        ("torch.empty + current stream (every op's floor)",
         lambda: (torch.empty(M // W, N, device="cuda", dtype=A.dtype), torch.cuda.current_stream().cuda_stream)),
        ("torch: matmul + dist.reduce_scatter_tensor", nccl_rs),
    ]
    results = []
    for name, fn in rows:
        torch.cuda.synchronize()
        free_before, reserved_before = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
        us = host_us(fn)
        # Device memory the row's calls took outside torch's allocator (their CUDA graphs, say).
        taken = free_before - torch.cuda.mem_get_info()[0] - (torch.cuda.memory_reserved() - reserved_before)
        results.append({"call": name, "host_us": us, "device_mib_taken": taken / 2**20})
        if dist.get_rank() == 0:
            print(f"{name:60s} {us:7.1f} us   {taken / 2**20:6.1f} MiB taken", flush=True)
    if args.json and dist.get_rank() == 0:
        with open(args.json, "w") as f:
            json.dump({"W": W, "M": M, "N": N, "K": K, "calls_per_sample": CALLS, "torch": torch.__version__,
                       "rows": results}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
