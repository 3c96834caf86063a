"""Where the eager / compiled tpgemm block loses against its CUDA-graph replay."""
import os, sys, time, statistics, argparse, json
for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(k, v)
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import torch, torch.distributed as dist
import torch_block as tb

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="llama3-8b")
ap.add_argument("--S", type=int, default=4096)
ap.add_argument("--out", default=".")
a = ap.parse_args()
local = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
import tpgemm, tpgemm.ops, tpgemm.nn
args = argparse.Namespace(variants=None, no_compile=False, warmup=5, iters=20)
b = tb.Bench(args); b.tp = tpgemm
W = b.W
H, Fd, Q = tb.MODELS[a.model]
S = a.S
torch.manual_seed(b.rank)
rnd = lambda *s: (torch.randn(*s, device="cuda", dtype=tb.DT) * 0.02)
w = {"qkv": rnd(Q // W, H), "o": rnd(H, H // W), "w13": rnd(2 * Fd // W, H), "w2": rnd(H, Fd // W)}
mods = tb.tpgemm_modules(b, a.model, w)
for m in mods: m.weight.requires_grad_(False)
x = torch.randn(S // W, H, device="cuda", dtype=tb.DT) * 0.1
fwd = lambda layers: (lambda t: tb.block(t, layers, H // W))
variants = {
  "tpgemm_eager": fwd(tb.torch_layers(b, "tpgemm", w)),
  "nccl_eager": fwd(tb.torch_layers(b, "dist", w)),
  "tpgemm_compiled": torch.compile(fwd(mods), fullgraph=True, dynamic=False),
  "nccl_compiled": torch.compile(fwd(tb.torch_layers(b, "funcol", w)), fullgraph=True, dynamic=False),
}
def log(*s):
    if b.rank == 0: print(*s, flush=True)
res = {}
with torch.no_grad():
    for name, f in variants.items():
        f(x); torch.cuda.synchronize()
        step = lambda: f(x)
        sync_ms = tb.timed(step, 5, 20)
        # back to back: 20 blocks between one pair of events
        for _ in range(3): step()
        torch.cuda.synchronize(); dist.barrier()
        ts = []
        for _ in range(5):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(20): step()
            e.record(); e.synchronize(); ts.append(s.elapsed_time(e) / 20)
        b2b = tb.max_over_ranks(statistics.median(ts))
        # host per block, GPU held busy
        hs = []
        for _ in range(5):
            torch.cuda.synchronize(); dist.barrier()
            torch.cuda._sleep(400_000_000)
            t0 = time.perf_counter()
            for _ in range(10): step()
            hs.append((time.perf_counter() - t0) / 10 * 1e3)
        torch.cuda.synchronize()
        host = tb.max_over_ranks(statistics.median(hs))
        res[name] = dict(sync_ms=sync_ms, b2b_ms=b2b, host_ms=host)
        log(f"{a.model} S={S} W={W} {name:16s} sync {sync_ms:.3f} ms  back-to-back {b2b:.3f} ms  host {host:.3f} ms/block")
    g = tb.graphed(lambda: variants["tpgemm_eager"](x))
    log(f"tpgemm_graph sync {tb.timed(g, 5, 20):.3f} ms")
    # impls chosen
    from tpgemm import _torch as T
    e = T._entry(b.group)
    for k, p in e.plans.items():
        if isinstance(k[-1], int):
            log("plan", k[:5], k[-1], p.impl, p.options.get("chunks_per_rank"))
    # profile
    from torch.profiler import profile, ProfilerActivity
    for name in ("tpgemm_eager", "tpgemm_compiled", "nccl_eager"):
        f = variants[name]
        torch.cuda.synchronize(); dist.barrier()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                f(x)
                torch.cuda.synchronize()
        if b.rank == 0:
            prof.export_chrome_trace(os.path.join(a.out, f"trace_{a.model}_{S}_{name}.json"))
            print(f"==== {name}")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
if b.rank == 0:
    json.dump(res, open(os.path.join(a.out, f"probe_{a.model}_{S}.json"), "w"), indent=1)
dist.destroy_process_group()
