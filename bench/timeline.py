"""GPU timeline of one tpgemm call per configuration: every kernel and copy of the call (from
torch.profiler's CUDA activity records), with its start and length in microseconds from the
call's first, rank 0's, printed, and each rank's Chrome trace written out. The ranks start the
profiled call together (a sleep, then an NCCL all-reduce that both finish at once), so a wait in
the timeline is the schedule's, not a peer's late start. The streams named are the driver's: a
plan replaying its calls from CUDA graphs (NOTE [call graphs]) runs them on streams of its own.

    python3 -m torch.distributed.run --standalone --nproc-per-node W bench/timeline.py -- \\
        --op gemm_ar --m 8192 --n 8192 --k 2048 --configs pipelined_ce:4,pipelined_ce:2 [--out DIR]

(The `--` keeps torchrun from taking --m for an abbreviation of one of its own flags.)

A config is impl:chunks (0: the planner's default chunks).
"""
import argparse
import json
import os

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from tpgemm import _C  # noqa: E402
from tpgemm import _torch as T  # noqa: E402

GPU_EVENTS = ("kernel", "gpu_memcpy", "gpu_memset")


def operands(op, m, n, k, world):
    """A, B and D of one rank (K is each rank's own; gemm_rs's D and ag_gemm's A hold M / W rows)."""
    opt = dict(device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m // world if op == "ag_gemm" else m, k, **opt)
    b = torch.randn(n, k, **opt)
    d = torch.empty(m // world if op == "gemm_rs" else m, n, **opt)
    return a, b, d


def last_call(path):
    """The GPU events of the trace's last call, in time order: after the last sleep, the first
    NCCL kernel (the start line) and everything after it."""
    ev = sorted((e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU_EVENTS),
                key=lambda e: e["ts"])
    sleeps = [i for i, e in enumerate(ev) if "spin_kernel" in e["name"]]
    if not sleeps:
        raise SystemExit(f"{path}: no torch.cuda._sleep kernel ('spin_kernel') recorded: cannot find the call")
    start = next((i for i in range(sleeps[-1], len(ev)) if "nccl" in ev[i]["name"].lower()), None)
    if start is None or start + 1 == len(ev):
        raise SystemExit(f"{path}: no NCCL start line, or nothing after it, behind the last sleep")
    return ev[start + 1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", default="gemm_ar", choices=("ag_gemm", "gemm_rs", "gemm_ar"))
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--configs", default="pipelined_ce:0", help="impl:chunks,... (chunks 0: the default)")
    ap.add_argument("--out", default=".", help="folder of the Chrome traces")
    args = ap.parse_args()

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    world, rank = dist.get_world_size(), dist.get_rank()
    team = T.team_for_group(None)
    a, b, d = operands(args.op, args.m, args.n, args.k, world)
    line = torch.zeros(1, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    os.makedirs(args.out, exist_ok=True)
    for config in args.configs.split(","):
        impl, chunks = config.split(":") if ":" in config else (config, "0")
        plan = _C.Plan(team, args.op, args.m, args.n, args.k, impl=impl, chunks_per_rank=int(chunks))
        run = lambda: plan.run(a.data_ptr(), b.data_ptr(), 0, d.data_ptr(), 0, stream)  # noqa: E731
        for _ in range(10):
            run()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                torch.cuda.synchronize()
                dist.barrier()
                torch.cuda._sleep(2_000_000)
                dist.all_reduce(line)  # the start line
                run()
            torch.cuda.synchronize()
        path = os.path.join(args.out, f"trace_{args.op}_{args.m}x{args.n}x{args.k}_{impl}_{chunks}_r{rank}.json")
        prof.export_chrome_trace(path)
        if rank == 0:
            ev = last_call(path)
            t0 = ev[0]["ts"]
            print(f"== {args.op} {args.m} x {args.n} x {args.k}, W={world}, {impl}, {plan.options}")
            print(f"  {'stream':>6} {'start':>8} {'us':>7}  what")
            for e in ev:
                what = e["name"] if e["cat"] == "kernel" else f"{e['name']} {e['args'].get('bytes', '')} B"
                print(f"  {e['args'].get('stream', '')!s:>6} {e['ts'] - t0:8.1f} {e['dur']:7.1f}  {what[:90]}")
            print(f"  call: {max(e['ts'] + e['dur'] for e in ev) - t0:.1f} us")
        del plan
        torch.cuda.synchronize()
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
