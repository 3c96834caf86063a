"""End-to-end benchmark: a Llama-3-style tensor-parallel block in PyTorch, with tpgemm's ops and modules
against PyTorch's own ways of running the same collectives and matmuls, on the same GPUs and inputs.

  python3 -m torch.distributed.run --standalone --nproc-per-node W bench/torch_block.py --json OUT.json
      [--models llama3-8b,llama3-70b,llama3-405b] [--tokens 4096,16384] [--modes fwd,fwdbwd,decode,host]
      [--decode-tokens 1,2,4,8,16,32,64,128,256] [--variants nccl_eager,...] [--iters 20] [--warmup 5]
      [--no-compile]

The block, per rank with TP = W and S tokens (S/W per rank: sequence parallel), model (H, F, Q) with
Q = (heads + 2 * kv_heads) * head_dim. Attention itself is left out: its output is the first H/W
columns of qkv, so what is timed is the four TP linears, their collectives and cheap elementwise work.
  attention: AG(x)[S, H] @ Wqkv^T -> o = qkv[:, :H/W] -> o @ Wo^T -> ReduceScatter -> h = x + a
  mlp:       AG(h) @ W13^T -> silu(gate) * up -> [S, F/W] @ W2^T -> ReduceScatter -> out = h + y

Modes
  fwd      the block's forward (no autograd)
  fwdbwd   forward + backward of loss = mean(out^2); x and the weights require grad
  decode   no sequence parallelism: y = AllReduce(a[M, K/W] @ W^T) for the MLP-down (K = F) and the
           attention-out (K = H) row-parallel linears, M in --decode-tokens
  host     host microseconds per eager GEMM+ReduceScatter call (200 calls back to back, no sync)

Variants (fwd, fwdbwd)
  nccl_eager       dist.all_gather_into_tensor / reduce_scatter_tensor + matmul, no overlap (fwdbwd:
                   the functional collectives with autograd); every row's rel_err is against it
  nccl_compiled    functional collectives + matmul under torch.compile(fullgraph=True): the baseline
  torch_symm       torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter (fwd)
  torch_async_tp   nccl_compiled with torch._inductor.config._micro_pipeline_tp (torch's async-TP pass)
  tpgemm_async_tp  torch_async_tp with its fused ops run by tpgemm (tpgemm.ops.serve_async_tp): what a
                   model compiled with torch's async-TP gets from tpgemm without a change to its code
  tpgemm_eager     fwd: torch.ops.tpgemm's drop-ins for the two symm_mem ops; fwdbwd: tpgemm.nn modules
  tpgemm_compiled  the tpgemm.nn block under torch.compile(fullgraph=True)
  tpgemm_graph     tpgemm_eager's forward captured in a CUDA graph, replays timed (fwd)
  no_comm_compiled the bound: nccl_compiled with every transfer taken out (each all-gather a local copy
                   of its size, each reduce-scatter the sum of the rank's own row blocks): the block's
                   arithmetic alone, what perfect overlap would take
Variants (decode): nccl_eager / nccl_graph (matmul + dist.all_reduce, eager / captured in a CUDA graph)
and tpgemm_eager / tpgemm_graph (torch.ops.tpgemm.matmul_all_reduce).

Timing: warmup, one pair of CUDA events per iteration, the median per rank, the max over ranks. A decode
iteration times DECODE_BATCH calls back to back (a decode step runs its layers so), divided by their number:
a call of some 20 us timed alone also times how late the slowest rank's host reached it.
Compiled variants compile once per shape (dynamic=False); each compile's seconds are printed and kept.
Speedups are over nccl_compiled (nccl_eager with --no-compile), and over nccl_graph for decode.
The default token counts (4096, 16384) are chosen so that a W=2 run of every model and mode should take
about six minutes (an estimate: most of it is some 40 compiles); the full set, --tokens 4096,8192,16384,
should take about half as long again.
"""
import os

# NVLink multicast is off on the machines this runs on: NCCL and torch's symmetric memory must not try it.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import argparse
import contextlib
import datetime
import gc
import json
import math
import statistics
import subprocess
import sys
import time

import torch
import torch._dynamo
import torch._inductor.config
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F

MODELS = {  # name: (H, F, Q)
    "llama3-8b": (4096, 14336, 6144),
    "llama3-70b": (8192, 28672, 10240),
    "llama3-405b": (16384, 53248, 20480),
}
VARIANTS = {
    "fwd": ("nccl_eager", "nccl_compiled", "torch_symm", "torch_async_tp", "tpgemm_async_tp",
            "tpgemm_eager", "tpgemm_compiled", "tpgemm_graph", "no_comm_compiled"),
    "fwdbwd": ("nccl_eager", "nccl_compiled", "torch_async_tp", "tpgemm_async_tp", "tpgemm_eager", "tpgemm_compiled",
               "no_comm_compiled"),
    "decode": ("nccl_eager", "nccl_graph", "tpgemm_eager", "tpgemm_graph"),
}
COMPILED = {"nccl_compiled", "torch_async_tp", "tpgemm_async_tp", "tpgemm_compiled", "no_comm_compiled"}
BASELINE = {"fwd": "nccl_compiled", "fwdbwd": "nccl_compiled", "decode": "nccl_graph"}
HOST_CALLS = 200  # few enough that the launch queue never fills: the host never waits for the GPU
HOST_M = 256      # small, so the GPU keeps up and the host time is the call's own cost
DECODE_BATCH = 10  # decode calls per timed sample
DT = torch.bfloat16


class Bench:
    """What every row needs: the arguments, this rank's place in the group, tpgemm (or why not), the rows."""
    def __init__(self, args):
        self.args, self.rows = args, []
        self.rank, self.W = dist.get_rank(), dist.get_world_size()
        self.pg = dist.group.WORLD
        self.group = self.pg.group_name
        self.tp, self.tp_err = None, "not imported"

    def log(self, msg):
        if self.rank == 0:
            print(msg, flush=True)

    def selected(self, mode):
        a = self.args
        return [v for v in VARIANTS[mode] if (a.variants is None or v in a.variants)
                and not (a.no_compile and v in COMPILED)]

    def emit(self, row):
        self.rows.append(row)
        n = f"S={row['S']}" if "S" in row else f"{row.get('layer', '')} M={row['M']}"
        head = f"{row['model']:12s} W={self.W} {row['mode']:6s} {n:>15s} {row['variant']:16s}"
        if row.get("error"):
            self.log(f"{head} ERROR {row['error']}")
        elif row["kind"] == "host_us":
            self.log(f"{head} {row['host_us']:9.1f} us per call (host)")
        else:
            comp = f"  compile {row['compile_s']:.1f} s" if "compile_s" in row else ""
            err = "n/a" if row["rel_err"] is None else f"{row['rel_err']:.1e}"
            self.log(f"{head} {row['ms']:9.3f} ms {row['tflops_per_gpu']:7.1f} TFLOP/s  rel_err {err}{comp}")


def max_over_ranks(v):
    t = torch.tensor([v], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def timed(step, warmup, iters, batch=1):
    """ms per step: each of `iters` samples times `batch` steps back to back."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(batch):
            step()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / batch)
    return max_over_ranks(statistics.median(ts))


def rel_err(got, ref):
    if ref is None:
        return None
    return max(((a.float() - r.float()).norm() / r.float().norm()).item() for a, r in zip(got, ref))


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def free():
    # Compiled graphs, CUDA graphs and their closures hold tensors; drop them before the next row.
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()


def graphed(fn):
    """fn captured in a CUDA graph; returns a step that replays it. fn runs eagerly first: tpgemm makes
    its plans (collectively) on a shape's first call, which cannot happen under capture."""
    fn()
    side = torch.cuda.Stream()  # warm up on a side stream, as torch.cuda.graph's documentation asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # thread_local: NCCL's and torch's helper threads may make CUDA calls while this one captures.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        out = fn()

    def step():
        graph.replay()
        return (out,)
    return step


def served_calls():
    """Calls of torch's async-TP ops that tpgemm took so far (0 before tpgemm.ops is loaded)."""
    ops = sys.modules.get("tpgemm.ops")
    return 0 if ops is None else ops.async_tp_calls_served()


@contextlib.contextmanager
def serving_async_tp():
    """torch.ops.symm_mem's fused ops run by tpgemm while inside (tpgemm.ops.serve_async_tp)."""
    import tpgemm.ops
    tpgemm.ops.serve_async_tp()
    try:
        yield
    finally:
        tpgemm.ops.serve_async_tp(False)


def measure(b, base, name, make, ref, flops, batch=1):
    """Times one variant of one row. Any failure (OOM included) becomes the row's error, not the run's."""
    row = dict(base, kind="time", variant=name, ms=None, tflops_per_gpu=None, rel_err=None, error=None)
    try:
        if name.startswith("tpgemm") and b.tp is None:
            raise RuntimeError(f"tpgemm unavailable: {b.tp_err}")
        # torch's async-TP is a compiler pass behind a flag; patch() puts the flag back afterwards.
        with (torch._inductor.config.patch(_micro_pipeline_tp=True) if name.endswith("async_tp")
              else contextlib.nullcontext()), (serving_async_tp() if name == "tpgemm_async_tp"
                                                else contextlib.nullcontext()):
            if name in COMPILED:
                torch._dynamo.reset()  # each compile starts clean: honest compile time, no recompile limit
            t0 = time.perf_counter()
            served_before = served_calls()
            step = make()
            got = step()  # a compiled variant compiles here
            torch.cuda.synchronize()
            if name == "tpgemm_async_tp" and served_calls() == served_before:
                raise RuntimeError("nothing ran on tpgemm: torch's async-TP pass put in no fused op here, or "
                                   "tpgemm declined every call")
            if name in COMPILED:
                row["compile_s"] = round(time.perf_counter() - t0, 1)
            row["rel_err"] = rel_err(got, ref)
            del got
            row["ms"] = timed(step, b.args.warmup, b.args.iters, batch)
            row["tflops_per_gpu"] = flops / row["ms"] / 1e9
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"[:200]
    b.emit(row)


def block(x, layers, ow):
    """The block's forward; layers are its four TP linears as callables, ow the attention output width."""
    qkv, wo, w13, w2 = layers
    # .contiguous(): a real attention writes a fresh tensor; every variant pays the same copy.
    h = x + wo(qkv(x)[:, :ow].contiguous())
    gu = w13(h)
    f = gu.shape[1] // 2
    return h + w2(F.silu(gu[:, :f]) * gu[:, f:])


def torch_layers(b, kind, w):
    """The four linears built from one way of gathering/scattering: AG+matmul for qkv and w13,
    matmul+RS for o and w2. Weights are nn.Linear-style [N, K]; the fused ops take B = weight.t()."""
    W, pg, g = b.W, b.pg, b.group
    if kind == "dist":
        def ag(a, wt):
            buf = a.new_empty((a.shape[0] * W, a.shape[1]))
            dist.all_gather_into_tensor(buf, a)
            return buf @ wt.t()
        def rs(a, wt):
            p = a @ wt.t()
            out = p.new_empty((p.shape[0] // W, p.shape[1]))
            dist.reduce_scatter_tensor(out, p)
            return out
    elif kind == "no_comm":  # the same arithmetic and local copies, no transfer (see no_comm_compiled)
        def ag(a, wt):
            return a.repeat(W, 1) @ wt.t()
        def rs(a, wt):
            p = a @ wt.t()
            return p.view(W, p.shape[0] // W, p.shape[1]).sum(0)
    elif kind in ("funcol", "funcol_autograd"):
        grad = kind == "funcol_autograd"
        agf = funcol.all_gather_tensor_autograd if grad else funcol.all_gather_tensor
        rsf = funcol.reduce_scatter_tensor_autograd if grad else funcol.reduce_scatter_tensor
        def ag(a, wt):
            return agf(a, 0, pg) @ wt.t()
        def rs(a, wt):
            return rsf(a @ wt.t(), "sum", 0, pg)
    else:  # "symm_mem" or "tpgemm": the same schemas
        ops = getattr(torch.ops, kind)
        def ag(a, wt):
            return ops.fused_all_gather_matmul(a, [wt.t()], 0, g, return_A=False)[1][0]
        def rs(a, wt):
            return ops.fused_matmul_reduce_scatter(a, wt.t(), "sum", 0, g)
    return (lambda a: ag(a, w["qkv"]), lambda a: rs(a, w["o"]),
            lambda a: ag(a, w["w13"]), lambda a: rs(a, w["w2"]))


def tpgemm_modules(b, model, w):
    """The block as tpgemm.nn modules holding the same weights as every other variant, or why not."""
    if b.tp is None:
        return f"tpgemm unavailable: {b.tp_err}"
    H, Fd, Q = MODELS[model]
    nn = b.tp.nn
    kw = dict(bias=False, group=None, sequence_parallel=True, device="cuda", dtype=DT)
    try:
        mods = (nn.ColumnParallelLinear(H, Q, **kw), nn.RowParallelLinear(H, H, **kw),
                nn.ColumnParallelLinear(H, 2 * Fd, **kw), nn.RowParallelLinear(Fd, H, **kw))
        with torch.no_grad():
            for m, k in zip(mods, ("qkv", "o", "w13", "w2")):
                m.weight.copy_(w[k])
        return mods
    except Exception as e:
        return f"tpgemm.nn: {type(e).__name__}: {e}"[:200]


def estimate_gib(H, Fd, Q, S, W, train):
    """Rough per-rank peak, to skip a row that cannot fit rather than crash on it."""
    weights = 2 * H * (Q + H + 3 * Fd) / W     # one bf16 copy of a rank's weights
    acts = 2 * S * (2 * H + (Q + 3 * Fd) / W)  # one forward's big tensors: gathered x and h, qkv, gate/up, silu*up
    # Two weight copies (plain tensors, tpgemm.nn modules) and their grads when training; training keeps
    # the forward's activations for backward and makes about as much again in gradients.
    total = weights * (4 if train else 2) + acts * (3 if train else 2)
    return total / 2**30 + 4  # NCCL buffers, symmetric-memory workspaces, cuBLAS, allocator slack


def block_row(b, model, mode, S, w, mods):
    H, Fd, Q = MODELS[model]
    W, train = b.W, mode == "fwdbwd"
    base = dict(model=model, W=W, mode=mode, S=S)
    flops = 2 * S * H * (Q + H + 3 * Fd) // W * (3 if train else 1)  # backward: dX and dW, twice the forward
    need = estimate_gib(H, Fd, Q, S, W, train)
    have = 0.9 * torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory / 2**30
    if need > have or S % W:
        why = f"needs about {need:.0f} GiB of {have:.0f}" if need > have else f"W={W} does not divide S"
        for name in b.selected(mode):
            b.emit(dict(base, kind="time", variant=name, ms=None, tflops_per_gpu=None, rel_err=None,
                        error="skipped: " + why))
        return
    x = (torch.randn(S // W, H, device="cuda", dtype=DT) * 0.1).requires_grad_(train)
    if not train:
        w = {k: t.detach() for k, t in w.items()}
    if not isinstance(mods, str):
        # A tpgemm.nn column layer keeps the gathered input for the weight gradient only while its
        # weight requires grad: without training it should not pay for that copy.
        for m in mods:
            m.weight.requires_grad_(train)
    ws = list(w.values())
    fc = "funcol_autograd" if train else "funcol"

    def fwd(layers):
        return lambda a: block(a, layers, H // W)
    def compiled(layers):
        return torch.compile(fwd(layers), fullgraph=True, dynamic=False)
    def step(f, params):
        """One timed call; returns what is compared with nccl_eager: out, and x.grad when training."""
        if not train:
            return lambda: (f(x),)
        def run():
            x.grad = None
            for p in params:
                p.grad = None
            out = f(x)
            out.float().square().mean().backward()
            return out, x.grad
        return run
    def modules():
        if isinstance(mods, str):
            raise RuntimeError(mods)
        return mods

    makers = {
        "nccl_eager": lambda: step(fwd(torch_layers(b, fc if train else "dist", w)), ws),
        "nccl_compiled": lambda: step(compiled(torch_layers(b, fc, w)), ws),
        "no_comm_compiled": lambda: step(compiled(torch_layers(b, "no_comm", w)), ws),
        "torch_async_tp": lambda: step(compiled(torch_layers(b, fc, w)), ws),
        "tpgemm_async_tp": lambda: step(compiled(torch_layers(b, fc, w)), ws),
        "torch_symm": lambda: step(fwd(torch_layers(b, "symm_mem", w)), ws),
        "tpgemm_eager": ((lambda: step(fwd(modules()), [m.weight for m in modules()])) if train
                         else lambda: step(fwd(torch_layers(b, "tpgemm", w)), ws)),
        "tpgemm_compiled": lambda: step(compiled(modules()), [m.weight for m in modules()]),
        "tpgemm_graph": lambda: graphed(lambda: fwd(torch_layers(b, "tpgemm", w))(x)),
    }
    with contextlib.nullcontext() if train else torch.no_grad():
        try:
            ref = tuple(t.detach().clone() for t in makers["nccl_eager"]()())
        except Exception as e:
            ref = None
            b.log(f"{model} {mode} S={S}: no reference ({type(e).__name__}: {str(e)[:120]})")
        for name in b.selected(mode):  # (the bound computes something else: no rel_err)
            measure(b, base, name, makers[name], None if name == "no_comm_compiled" else ref, flops)
    del x, ref, makers


def decode_rows(b, model, w):
    H = MODELS[model][0]
    for layer, wt in (("mlp_down", w["w2"].detach()), ("attn_out", w["o"].detach())):
        for M in b.args.decode_tokens:
            a = torch.randn(M, wt.shape[1], device="cuda", dtype=DT) * 0.1

            def nccl():
                y = a @ wt.t()
                dist.all_reduce(y)
                return y
            def tpg():
                return torch.ops.tpgemm.matmul_all_reduce(a, wt.t(), "sum", b.group)

            makers = {"nccl_eager": lambda: lambda: (nccl(),), "nccl_graph": lambda: graphed(nccl),
                      "tpgemm_eager": lambda: lambda: (tpg(),), "tpgemm_graph": lambda: graphed(tpg)}
            ref = (nccl().clone(),)
            base = dict(model=model, W=b.W, mode="decode", layer=layer, M=M)
            for name in b.selected("decode"):
                measure(b, base, name, makers[name], ref, 2 * M * wt.shape[1] * H, DECODE_BATCH)
            del a, ref, makers
            free()


def host_rows(b, model, w):
    """Host cost of one eager GEMM+ReduceScatter call (the MLP-down shape at M = HOST_M)."""
    wt = w["w2"].detach()
    a = torch.randn(HOST_M, wt.shape[1], device="cuda", dtype=DT) * 0.1

    def nccl():
        p = a @ wt.t()
        out = p.new_empty((HOST_M // b.W, p.shape[1]))
        dist.reduce_scatter_tensor(out, p)
        return out
    def tpg():
        return torch.ops.tpgemm.fused_matmul_reduce_scatter(a, wt.t(), "sum", 0, b.group)

    for name, fn in (("nccl_eager", nccl), ("tpgemm_eager", tpg)):
        row = dict(kind="host_us", model=model, W=b.W, mode="host", M=HOST_M, K=wt.shape[1], N=wt.shape[0],
                   variant=name, host_us=None, error=None)
        try:
            if name.startswith("tpgemm") and b.tp is None:
                raise RuntimeError(f"tpgemm unavailable: {b.tp_err}")
            fn()  # tpgemm makes its plan on the first call
            torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(HOST_CALLS):
                fn()
            us = (time.perf_counter() - t0) / HOST_CALLS * 1e6
            torch.cuda.synchronize()
            row["host_us"] = max_over_ranks(us)
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:200]
        b.emit(row)


def summarize(rows):
    """Per mode: each row's ms and speedup over the baseline, and each variant's geomean speedup."""
    summary = {}
    for mode in ("fwd", "fwdbwd", "decode"):
        done = [r for r in rows if r["kind"] == "time" and r["mode"] == mode and r["ms"]]
        if not done:
            continue
        base = BASELINE[mode] if any(r["variant"] == BASELINE[mode] for r in done) else "nccl_eager"
        table = {}
        for r in done:
            table.setdefault((r["model"], r.get("layer"), r.get("S", r.get("M"))), {})[r["variant"]] = r["ms"]
        ratios, entries = {}, []
        for (model, layer, n), ms in table.items():
            sp = {v: ms[base] / t for v, t in ms.items()} if base in ms else {}
            for v, s in sp.items():
                ratios.setdefault(v, []).append(s)
            entries.append(dict(model=model, layer=layer, tokens=n, ms=ms, speedup=sp))
        summary[mode] = dict(baseline=base, rows=entries,
                             geomean_speedup={v: geomean(xs) for v, xs in ratios.items()})
    return summary


def print_summary(summary):
    for mode, s in summary.items():
        names = [v for v in VARIANTS[mode] if any(v in e["ms"] for e in s["rows"])]
        print(f"\n{mode}: ms (speedup over {s['baseline']})")
        print(f"{'':28s}" + "".join(f"{v:>19s}" for v in names))
        for e in s["rows"]:
            label = f"{e['model']} {e['layer']} M={e['tokens']}" if e["layer"] else f"{e['model']} S={e['tokens']}"
            cells = [f"{e['ms'][v]:8.3f} ({e['speedup'][v]:.2f}x)" if v in e["speedup"]
                     else f"{e['ms'][v]:8.3f}" if v in e["ms"] else "-" for v in names]
            print(f"{label:28s}" + "".join(f"{c:>19s}" for c in cells))
        gm = s["geomean_speedup"]
        print(f"{'geomean':28s}" + "".join(f"{(f'{gm[v]:.3f}x' if gm.get(v) else '-'):>19s}" for v in names))
        bound = gm.get("no_comm_compiled")
        if bound:
            print(f"{'of the bound (no_comm)':28s}" + "".join(
                f"{(f'{gm[v] / bound:.3f}' if gm.get(v) else '-'):>19s}" for v in names))


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
                              capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return None


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(v) for v in s.split(",") if v]  # noqa: E731
    names = lambda s: [v for v in s.split(",") if v]  # noqa: E731
    p.add_argument("--json", help="write meta, rows and summary here (rank 0)")
    p.add_argument("--models", type=names, default=list(MODELS))
    p.add_argument("--tokens", type=ints, default=[4096, 16384], help="S for fwd and fwdbwd")
    p.add_argument("--modes", type=names, default=["fwd", "fwdbwd", "decode", "host"])
    p.add_argument("--decode-tokens", type=ints, default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    p.add_argument("--variants", type=names, default=None, help="default: every variant of each mode")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-compile", action="store_true", help="skip every torch.compile variant")
    a = p.parse_args()
    for kind, given, known in (("model", a.models, MODELS), ("mode", a.modes, ("fwd", "fwdbwd", "decode", "host")),
                               ("variant", a.variants or [], {v for vs in VARIANTS.values() for v in vs})):
        if set(given) - set(known):
            p.error(f"unknown {kind}: {sorted(set(given) - set(known))}; known: {sorted(known)}")
    return a


def main():
    args = parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    # device_id creates the NCCL communicator now; the timeout ends a run whose ranks fell out of step
    # instead of letting it hang.
    dist.init_process_group("nccl", device_id=torch.device("cuda", local), timeout=datetime.timedelta(minutes=5))
    b = Bench(args)
    t_start = time.perf_counter()
    try:  # torch_symm and torch_async_tp need it; their rows say so if it fails
        import torch.distributed._symmetric_memory as symm_mem
        symm_mem.enable_symm_mem_for_group(b.group)
    except Exception as e:
        b.log(f"symmetric memory not enabled: {type(e).__name__}: {e}")
    try:  # imported late so that a broken tpgemm still leaves the torch variants timed
        import tpgemm.ops  # registers torch.ops.tpgemm
        import tpgemm.nn
        b.tp = tpgemm
    except Exception as e:
        b.tp_err = f"{type(e).__name__}: {e}"[:200]
        b.log(f"tpgemm rows will be errors: {b.tp_err}")
    b.log(f"W={b.W} {torch.cuda.get_device_name()} torch {torch.__version__}")
    for model in args.models:
        H, Fd, Q = MODELS[model]
        torch.manual_seed(b.rank)  # each rank its own shard of weights and tokens
        rnd = lambda *shape: (torch.randn(*shape, device="cuda", dtype=DT) * 0.02).requires_grad_()  # noqa: E731
        w = {"qkv": rnd(Q // b.W, H), "o": rnd(H, H // b.W), "w13": rnd(2 * Fd // b.W, H), "w2": rnd(H, Fd // b.W)}
        mods = tpgemm_modules(b, model, w) if {"fwd", "fwdbwd"} & set(args.modes) else None
        for mode in args.modes:
            if mode == "decode":
                decode_rows(b, model, w)
            elif mode == "host":
                host_rows(b, model, w)
            else:
                for S in args.tokens:
                    block_row(b, model, mode, S, w, mods)
                    free()
        del w, mods
        free()
    b.log(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    if b.rank == 0:
        summary = summarize(b.rows)
        print_summary(summary)
        if args.json:
            meta = dict(W=b.W, torch=torch.__version__, device=torch.cuda.get_device_name(), argv=sys.argv,
                        date=datetime.datetime.now().isoformat(timespec="seconds"), git_commit=git_commit())
            with open(args.json, "w") as f:
                json.dump(dict(meta=meta, rows=b.rows, summary=summary), f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
