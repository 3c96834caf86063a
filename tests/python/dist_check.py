"""The torch layer on several GPUs, one process per GPU: every op and implementation against an
fp32 reference on fresh random data, the drop-in ops against torch.ops.symm_mem's, the modules'
gradients, torch.compile(fullgraph=True), CUDA-graph replay, bad input, and the host time of an
eager call. Exits non-zero if any check failed (test_dist.py runs it).

    python3 -m torch.distributed.run --standalone --nproc-per-node W tests/python/dist_check.py
"""
import os
import statistics
import sys
import time

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import tpgemm  # noqa: E402
import tpgemm.ops  # noqa: E402,F401
from tpgemm import _torch as T  # noqa: E402
from tpgemm.nn import ColumnParallelLinear, RowParallelLinear  # noqa: E402

ops = torch.ops.tpgemm
failures = []
BF16_TOL = 2e-2  # bf16 operands and output against an fp32 reference


def log(msg):
    if dist.get_rank() == 0:
        print(msg, flush=True)


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"[rank {dist.get_rank()}] FAIL {what}", flush=True)


def rel(x, ref):
    x, ref = x.float(), ref.float()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def gather(x, dim=0):
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim)


def randn(*shape):
    return (torch.randn(*shape, device="cuda") * 0.5).to(torch.bfloat16)


def check_ops(g, W, r):
    shapes = [(4096, 4096, 4096), (2048, 3584, 8192), (64 * W, 2048, 1024), (24 * W, 136, 264), (W, 64, 128)]
    for impl in ("auto", "baseline", "pipelined_ce", "fused", "allgather_gemm"):
        T.set_impl("ag_gemm", impl)
        for m, n, k in shapes:
            A, w1, w2 = randn(m // W, k), randn(n, k), randn(n // 2 + 8, k)
            Ag = gather(A)
            A_full, (d1, d2) = ops.fused_all_gather_matmul(A, [w1.t(), w2.t()], 0, g, return_A=True)
            check(torch.equal(A_full, Ag), f"ag {impl} {m}x{n}x{k}: the gathered A differs")
            e1, e2 = rel(d1, Ag.float() @ w1.float().t()), rel(d2, Ag.float() @ w2.float().t())
            check(e1 < BF16_TOL and e2 < BF16_TOL, f"ag {impl} {m}x{n}x{k}: rel err {e1:.2e} {e2:.2e}")
    for impl in ("auto", "baseline", "pipelined_ce", "gemm_reducescatter", "fused"):
        T.set_impl("gemm_rs", impl)
        for m, n, k in shapes:
            for sd in (0, -1):
                if sd == -1 and n % (8 * W):
                    continue
                A, w = randn(m, k), randn(n, k)
                ref = sum(a.float() @ b.float().t() for a, b in zip(gather(A[None])[:], gather(w[None])[:]))
                ref = ref.chunk(W, dim=sd)[r]
                for op in ("sum", "avg"):
                    d = ops.fused_matmul_reduce_scatter(A, w.t(), op, sd, g)
                    e = rel(d, ref / (W if op == "avg" else 1))
                    check(d.shape == ref.shape and e < BF16_TOL, f"rs {impl} {m}x{n}x{k} dim {sd} {op}: rel err {e:.2e}")
    for impl in ("auto", "baseline", "pipelined_ce", "gemm_oneshot", "gemm_twoshot", "fused"):
        T.set_impl("gemm_ar", impl)
        for m, n, k in [(1, 4096, 1024), (2, 8192, 512), (3, 1024, 2048), (16, 8192, 2048), (64, 8192, 2048),
                        (128 * W, 4096, 2048), (4096, 4096, 1024)]:
            A, w = randn(m, k), randn(n, k)
            ref = sum(a.float() @ b.float().t() for a, b in zip(gather(A[None]), gather(w[None])))
            d = ops.matmul_all_reduce(A, w.t(), "sum", g)
            check(rel(d, ref) < BF16_TOL, f"ar {impl} {m}x{n}x{k}: rel err {rel(d, ref):.2e}")
    # A read in place at a row stride (a slice of a wider tensor, a split of a fused output), by
    # every implementation that takes lda.
    strided = (("slice", lambda rows, k: randn(rows, k + 64)[:, :k]),
               ("split", lambda rows, k: randn(rows, 3 * k).split(k, dim=-1)[1]))
    m, n, k = 64 * W, 1024, 512
    for name, make in strided:
        for impl in ("auto", "baseline", "pipelined_ce"):
            for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
                T.set_impl(op, impl)
            A, w = make(m // W, k), randn(n, k)
            check(tpgemm.ops._lda(A)[0] > k, f"{name}: A {tuple(A.shape)} strides {A.stride()} not read in place")
            _, (d,) = ops.fused_all_gather_matmul(A, [w.t()], 0, g, return_A=False)
            e = rel(d, gather(A).float() @ w.float().t())
            check(e < BF16_TOL, f"ag {impl} strided A ({name}): rel err {e:.2e}")
            A = make(m, k)
            ref = sum(a.float() @ b.float().t() for a, b in zip(gather(A[None]), gather(w[None])))
            e = rel(ops.fused_matmul_reduce_scatter(A, w.t(), "sum", 0, g), ref.chunk(W)[r])
            check(e < BF16_TOL, f"rs {impl} strided A ({name}): rel err {e:.2e}")
            e = rel(ops.matmul_all_reduce(A, w.t(), "sum", g), ref)
            check(e < BF16_TOL, f"ar {impl} strided A ({name}): rel err {e:.2e}")
    for impl in ("auto", "nccl", "oneshot", "twoshot"):
        T.set_impl("all_reduce", impl)
        # Counts not a multiple of 8 run on NCCL (auto) or torch's path (the symmetric kernels
        # forced); 600 to 1024 share one plan (a power of two's).
        for count in (8, 4096, 1 << 20, 1001, 3, 600, 1024, 5000):
            x = randn(count)
            ref = gather(x[None]).float().sum(0)
            check(rel(ops.all_reduce(x, "sum", g), ref) < 1e-2, f"all_reduce {impl} {count}")
        plans = [key for key in T._entry(g).allreduce if key[0] == 1024 and key[2] == impl]
        check(len(plans) == 1, f"all_reduce {impl}: counts 600 to 1024 made {len(plans)} plans of 1024, expected 1")
        if impl == "auto" and W > 1:  # measured on the team (NOTE [measured all-reduce])
            source, detail, _ = T._entry(g).allreduce[plans[0]].selection
            check(source == "tuned" and detail.startswith("4096 B: nccl ") and " -> " in detail,
                  f"all_reduce auto's selection: {source}: {detail}")
    check(ops.all_reduce(randn(0), "sum", g).numel() == 0, "all_reduce of an empty tensor")
    T.set_impl("all_reduce", "auto")
    x = randn(4097)[1:]  # a view 2 bytes into its storage
    check(rel(ops.all_reduce(x, "sum", g), gather(x[None]).float().sum(0)) < 1e-2, "all_reduce of an unaligned view")
    for op in ("ag_gemm", "gemm_rs", "gemm_ar", "all_reduce"):
        T.set_impl(op, "auto")
    # [1, S, H] activations split along dim 1 (sequence parallel, batch 1): tpgemm's plans serve
    # them as rows, each call making a plan of its own shape.
    before = len(T._entry(g).plans)
    A, w = randn(1, 40, 1024), randn(768, 1024)
    G, (D,) = ops.fused_all_gather_matmul(A, [w.t()], 1, g)
    full = gather(A, 1)
    check(tuple(D.shape) == (1, 40 * W, 768) and torch.equal(G, full) and rel(D, full.float() @ w.float().t()) < BF16_TOL,
          f"ag along dim 1 of [1, S/W, K]: D {tuple(D.shape)}, rel err {rel(D, full.float() @ w.float().t()):.2e}")
    A2 = randn(1, 40 * W, 1024)
    D2 = ops.fused_matmul_reduce_scatter(A2, w.t(), "sum", 1, g)
    ref2 = (gather(A2[None]).float().sum(0) @ w.float().t()).chunk(W, 1)[r]
    check(tuple(D2.shape) == (1, 40, 768) and rel(D2, ref2) < BF16_TOL,
          f"rs along dim 1 of [1, S, K]: D {tuple(D2.shape)}, rel err {rel(D2, ref2):.2e}")
    check(len(T._entry(g).plans) > before, "dim-1 calls of [1, S, K] made no tpgemm plan: torch's path ran them")
    # Batch first, [3, S/W, H] split along dim 1: the dim moved first (NOTE [gather dim moved
    # first]), on tpgemm's plans; the AllGather's outputs views with torch's async-TP strides.
    before = len(T._entry(g).plans)
    A = randn(3, 40, 1024)
    G, (D,) = ops.fused_all_gather_matmul(A, [w.t()], 1, g)
    full = gather(A, 1)
    check(tuple(D.shape) == (3, 40 * W, 768) and D.stride() == (768, 3 * 768, 1) and G.stride() == (1024, 3 * 1024, 1)
          and torch.equal(G, full) and rel(D, full.float() @ w.float().t()) < BF16_TOL,
          f"ag along dim 1 of [3, S/W, K]: D {tuple(D.shape)} strides {D.stride()}, G strides {G.stride()}, "
          f"rel err {rel(D, full.float() @ w.float().t()):.2e}")
    A2 = randn(3, 40 * W, 1024)
    D2 = ops.fused_matmul_reduce_scatter(A2, w.t(), "sum", 1, g)
    ref2 = (gather(A2[None]).float().sum(0) @ w.float().t()).chunk(W, 1)[r]
    check(tuple(D2.shape) == (3, 40, 768) and D2.is_contiguous() and rel(D2, ref2) < BF16_TOL,
          f"rs along dim 1 of [3, S, K]: D {tuple(D2.shape)}, rel err {rel(D2, ref2):.2e}")
    D3 = ops.fused_matmul_reduce_scatter(D, w[:, :768].t(), "sum", 1, g)  # (D moved first lies packed)
    ref3 = (gather(D[None]).float().sum(0) @ w[:, :768].float().t()).chunk(W, 1)[r]
    check(rel(D3, ref3) < BF16_TOL, f"rs along dim 1 of a gathered output (read in place): {rel(D3, ref3):.2e}")
    check(len(T._entry(g).plans) > before, "dim-1 calls of [3, S, K] made no tpgemm plan: torch's path ran them")
    log(f"ops: {len(failures)} failure(s) so far")


def check_token_counts(g, W, r):
    """A serving loop's token counts: more distinct counts per shape than get plans of their own,
    so that the later ones run on a plan's ranges of M, pipelined_ce's too (NOTE [pipelined calls
    of fewer rows]); each call against its reference, the counts revisited in another order."""
    n, k = 1024, 512
    counts = [W * c for c in (40, 9, 33, 17, 64, 3, 50, 1, 23, 40, 3, 61)]
    for impl in ("auto", "pipelined_ce"):
        for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
            T.set_impl(op, impl)
        w = randn(n, k)
        for m in counts:
            A = randn(m // W, k)
            _, (d,) = ops.fused_all_gather_matmul(A, [w.t()], 0, g, return_A=False)
            e = rel(d, gather(A).float() @ w.float().t())
            check(e < BF16_TOL, f"ag {impl} M={m} (token counts): rel err {e:.2e}")
            A = randn(m, k)
            ref = sum(a.float() @ b.float().t() for a, b in zip(gather(A[None]), gather(w[None])))
            d = ops.fused_matmul_reduce_scatter(A, w.t(), "sum", 0, g)
            e = rel(d, ref.chunk(W)[r])
            check(e < BF16_TOL, f"rs {impl} M={m} (token counts): rel err {e:.2e}")
            A = randn(m // W + 1, k)  # gemm_ar: any M
            ref = sum(a.float() @ b.float().t() for a, b in zip(gather(A[None]), gather(w[None])))
            d = ops.matmul_all_reduce(A, w.t(), "sum", g)
            check(rel(d, ref) < BF16_TOL, f"ar {impl} M={m // W + 1} (token counts): rel err {rel(d, ref):.2e}")
    for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
        T.set_impl(op, "auto")


def check_fp32_output(g, W, r):
    """A plan with out_dtype='fp32': bf16 A and B, fp32 D, against an fp32 reference; the reducing ops
    run the baseline (its partial sums reduced in fp32; auto takes it, the others refuse by name). And
    e4m3 operands with their scales."""
    team = T.team_for_group(g)
    stream = T.stream(torch.cuda.current_device())
    cases = (("gemm_ar", (3, 1024, 512)), ("gemm_ar", (256 * W, 2048, 1024)), ("gemm_rs", (256 * W, 2048, 1024)),
             ("ag_gemm", (256 * W, 2048, 1024)))
    for op, (m, n, k) in cases:
        for impl in ("baseline", "auto"):
            plan = tpgemm._C.Plan(team, op, m, n, k, dtype="bf16", out_dtype="fp32", impl=impl)
            a_rows = m // W if op == "ag_gemm" else m
            A, w = randn(a_rows, k), randn(n, k)
            if op == "ag_gemm":
                ref = gather(A).float() @ w.float().t()
            else:
                ref = sum(a.float() @ b.float().t() for a, b in zip(gather(A[None]), gather(w[None])))
                if op == "gemm_rs":
                    ref = ref.chunk(W, dim=0)[r]
            D = torch.full(ref.shape, float("nan"), dtype=torch.float32, device="cuda")
            plan.run(T.address(A, "A"), T.address(w, "B"), 0, T.address(D, "D"), 0, stream)
            torch.cuda.synchronize()
            e = rel(D, ref)
            # Partial sums reduced in fp32 are the baseline's alone; an all-gather's D is one GEMM's.
            check((op == "ag_gemm" or plan.impl == "baseline") and e < 1e-4,
                  f"{op} out fp32 {impl} {m}x{n}x{k}: ran {plan.impl}, rel err {e:.2e}")
    code, msg = tpgemm._C.Plan.can_implement(team, "gemm_rs", 256 * W, 2048, 1024, impl="pipelined_ce",
                                             out_dtype="fp32")
    check(code == "Unsupported" and "out_dtype" in msg, f"pipelined_ce with out_dtype fp32: {code} {msg}")
    # e4m3 A and B (torch.float8_e4m3fn) with this rank's scales, D in bf16.
    m, n, k = 64, 1024, 512
    plan = tpgemm._C.Plan(team, "gemm_ar", m, n, k, dtype="e4m3", out_dtype="bf16")
    A8, w8 = randn(m, k).float().to(torch.float8_e4m3fn), randn(n, k).float().to(torch.float8_e4m3fn)
    sa, sb = (torch.tensor(v, dtype=torch.float32, device="cuda") for v in (0.5 + 0.25 * r, 1.5))
    deq_a, deq_w = A8.float() * sa, w8.float() * sb
    ref = sum(a @ b.t() for a, b in zip(gather(deq_a[None]), gather(deq_w[None])))
    D = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    plan.run(T.address(A8, "A"), T.address(w8, "B"), 0, T.address(D, "D"), 0, stream,
             a_scale=sa.data_ptr(), b_scale=sb.data_ptr())
    torch.cuda.synchronize()
    check(rel(D, ref) < BF16_TOL, f"gemm_ar e4m3 -> bf16 {m}x{n}x{k}: rel err {rel(D, ref):.2e}")
    # torch's scaled ops (tensor-wise e4m3), tpgemm's path: against the dequantised fp32 reference.
    # B's scale a view 4 bytes into its storage: cuBLASLt's 16-byte alignment is the op's to meet.
    sa, sb = torch.tensor(0.75, device="cuda"), torch.tensor([0.0, 1.25], device="cuda")[1]
    for m, n, k in ((128 * W, 2048, 1024), (16 * W, 4096, 512)):
        A8, w8 = randn(m // W, k).float().to(torch.float8_e4m3fn), randn(n, k).float().to(torch.float8_e4m3fn)
        G, (d,) = ops.fused_all_gather_scaled_matmul(A8, [w8.t()], sa, [sb], 0, g, [None], [None], [torch.bfloat16],
                                                     [False])
        A_full = gather(A8.float())
        check(torch.equal(G.float(), A_full), f"ag scaled {m}x{n}x{k}: the gathered A differs")
        e = rel(d, (A_full * sa) @ (w8.float() * sb).t())
        check(d.dtype == torch.bfloat16 and e < BF16_TOL, f"ag scaled {m}x{n}x{k}: rel err {e:.2e}")
        A8r = randn(m, k).float().to(torch.float8_e4m3fn)
        ref = sum(a @ b.t() for a, b in zip(gather(A8r.float()[None] * sa), gather(w8.float()[None] * sb)))
        d = ops.fused_scaled_matmul_reduce_scatter(A8r, w8.t(), sa, sb, "sum", 0, 0, g, [m, n], out_dtype=torch.float32)
        e = rel(d, ref.chunk(W, dim=0)[r])
        check(d.dtype == torch.float32 and e < 1e-3, f"rs scaled {m}x{n}x{k}: rel err {e:.2e}")
    # e5m2 (a gradient's FP8 type) beside e4m3, either way round, tpgemm's path (no fallback).
    noted = len(tpgemm.ops._noted)
    m, n, k = 128 * W, 2048, 1024
    for ta, tb in ((torch.float8_e5m2, torch.float8_e4m3fn), (torch.float8_e4m3fn, torch.float8_e5m2)):
        A8, w8 = randn(m // W, k).float().to(ta), randn(n, k).float().to(tb)
        G, (d,) = ops.fused_all_gather_scaled_matmul(A8, [w8.t()], sa, [sb], 0, g, [None], [None], [torch.bfloat16],
                                                     [False])
        A_full = gather(A8.float())
        e = rel(d, (A_full * sa) @ (w8.float() * sb).t())
        check(G.dtype == ta and e < BF16_TOL, f"ag scaled {ta} x {tb} {m}x{n}x{k}: rel err {e:.2e}")
        A8r = randn(m, k).float().to(ta)
        ref = sum(a @ b.t() for a, b in zip(gather(A8r.float()[None] * sa), gather(w8.float()[None] * sb)))
        d = ops.fused_scaled_matmul_reduce_scatter(A8r, w8.t(), sa, sb, "sum", 0, 0, g, [m, n], out_dtype=torch.bfloat16)
        e = rel(d, ref.chunk(W, dim=0)[r])
        check(e < BF16_TOL, f"rs scaled {ta} x {tb} {m}x{n}x{k}: rel err {e:.2e}")
    check(len(tpgemm.ops._noted) == noted, f"e5m2 scaled ops fell back to torch: {sorted(tpgemm.ops._noted)}")
    code, msg = tpgemm._C.Plan.can_implement(team, "gemm_rs", 256 * W, 2048, 1024, dtype="e5m2", out_dtype="bf16")
    check(code == "Unsupported" and "e5m2 x e5m2" in msg, f"e5m2 x e5m2: {code} {msg}")
    # Row-wise scales (torch._scaled_mm's: A's rows x 1, 1 x N), tpgemm's path, each rank its own;
    # the all-gather with a second B, which torch multiplies with the gathered rows' scales.
    noted = len(tpgemm.ops._noted)  # tpgemm's path must run them: no new fallback
    for m, n, k in ((128 * W, 2048, 1024), (16 * W, 1024, 512), (W, 1024, 512)):
        A8, w8, w8b = (randn(*s).float().to(torch.float8_e4m3fn) for s in ((m // W, k), (n, k), (n // 2, k)))
        sa = torch.rand(m // W, 1, device="cuda") + 0.5
        sb, sbb = torch.rand(1, n, device="cuda") + 0.5, torch.rand(1, n // 2, device="cuda") + 0.5
        G, (d, d2) = ops.fused_all_gather_scaled_matmul(A8, [w8.t(), w8b.t()], sa, [sb, sbb], 0, g, [None, None],
                                                        [None, None], [torch.bfloat16, torch.bfloat16], [False, False])
        A_deq = gather(A8.float() * sa)
        e = rel(d, A_deq @ (w8.float() * sb.t()).t())
        e2 = rel(d2, A_deq @ (w8b.float() * sbb.t()).t())
        check(e < BF16_TOL and e2 < BF16_TOL, f"ag scaled row-wise {m}x{n}x{k}: rel err {e:.2e}, second B {e2:.2e}")
        A8r, sar = randn(m, k).float().to(torch.float8_e4m3fn), torch.rand(m, 1, device="cuda") + 0.5
        ref = sum(a @ b.t() for a, b in zip(gather((A8r.float() * sar)[None]), gather((w8.float() * sb.t())[None])))
        d = ops.fused_scaled_matmul_reduce_scatter(A8r, w8.t(), sar, sb, "sum", 0, 0, g, [m, n],
                                                   out_dtype=torch.bfloat16)
        e = rel(d, ref.chunk(W, dim=0)[r])
        check(e < BF16_TOL, f"rs scaled row-wise {m}x{n}x{k}: rel err {e:.2e}")
    check(len(tpgemm.ops._noted) == noted, f"row-wise scaled ops fell back to torch: {sorted(tpgemm.ops._noted)}")
    code, msg = tpgemm._C.Plan.can_implement(team, "gemm_rs", 256 * W, 2048, 1024, dtype="e4m3", out_dtype="bf16",
                                             impl="fused", scale="row")
    check(code == "Unsupported" and "scale_mode=row" in msg, f"fused with row-wise scales: {code} {msg}")
    check_block_scales(g, W, r)
    log(f"fp32 output: {len(failures)} failure(s) so far")


def _deq_rows(x8, s):
    """x8 [rows, K] with block-wise scales s (rows, K/128): each row's 128 columns times their scale."""
    return x8.float() * s.repeat_interleave(128, dim=1)[:, :x8.shape[1]]


def _deq_blocks(w8, s):
    """The weight w8 [N, K] with block-wise scales s (K/128, N/128): each 128 x 128 block times its scale."""
    n, k = w8.shape
    return w8.float() * s.t().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]


def check_block_scales(g, W, r):
    """Block-wise scales (torch._scaled_mm's BlockWise1x128 for A, BlockWise128x128 for B), tpgemm's
    path, each rank its own; the all-gather with a second B, which torch multiplies with the gathered
    rows' scales. K = 384: B's scales are three K blocks in rows of three (packed, as torch 2.11's
    check asks; tpgemm pads them to cuBLASLt's stride of four itself)."""
    team = T.team_for_group(g)
    noted = len(tpgemm.ops._noted)  # tpgemm's path must run them: no new fallback
    for m, n, k in ((128 * W, 2048, 1024), (16 * W, 1024, 384)):
        kb = k // 128
        A8, w8, w8b = (randn(*s).float().to(torch.float8_e4m3fn) for s in ((m // W, k), (n, k), (n // 2, k)))

        def a_scales(rows):  # (rows, K/128), strides (1, rows)
            return (torch.rand(kb, rows, device="cuda") + 0.5).t()

        def b_scales(rows):  # (K/128, N/128), strides (1, K/128)
            return (torch.rand(-(-rows // 128), kb, device="cuda") + 0.5).t()
        sa, sb, sbb = a_scales(m // W), b_scales(n), b_scales(n // 2)
        A_deq = gather(_deq_rows(A8, sa))
        if kb % 4 == 0:  # a second B runs in torch._scaled_mm, right only there (_torch_block_mm_check)
            G, (d, d2) = ops.fused_all_gather_scaled_matmul(A8, [w8.t(), w8b.t()], sa, [sb, sbb], 0, g, [None, None],
                                                            [None, None], [torch.bfloat16] * 2, [False, False])
            e, e2 = rel(d, A_deq @ _deq_blocks(w8, sb).t()), rel(d2, A_deq @ _deq_blocks(w8b, sbb).t())
        else:
            try:
                ops.fused_all_gather_scaled_matmul(A8, [w8.t(), w8b.t()], sa, [sb, sbb], 0, g, [None, None],
                                                   [None, None], [torch.bfloat16] * 2, [False, False])
                check(False, f"ag scaled block-wise {m}x{n}x{k} with two Bs: ran (torch's sums there are wrong)")
            except tpgemm.Unsupported as ex:
                check("multiple of 512" in str(ex), f"ag scaled block-wise {m}x{n}x{k} with two Bs: {ex}")
            G, (d,) = ops.fused_all_gather_scaled_matmul(A8, [w8.t()], sa, [sb], 0, g, [None], [None],
                                                         [torch.bfloat16], [False])
            e, e2 = rel(d, A_deq @ _deq_blocks(w8, sb).t()), 0.0
        check(e < BF16_TOL and e2 < BF16_TOL, f"ag scaled block-wise {m}x{n}x{k}: rel err {e:.2e}, second B {e2:.2e}")
        A8r = randn(m, k).float().to(torch.float8_e4m3fn)
        sar = a_scales(m)
        ref = sum(a @ b.t() for a, b in zip(gather(_deq_rows(A8r, sar)[None]), gather(_deq_blocks(w8, sb)[None])))
        d = ops.fused_scaled_matmul_reduce_scatter(A8r, w8.t(), sar, sb, "sum", 0, 0, g, [m, n],
                                                   out_dtype=torch.float32)
        e = rel(d, ref.chunk(W, dim=0)[r])
        check(e < 1e-3, f"rs scaled block-wise {m}x{n}x{k}: rel err {e:.2e}")
    check(len(tpgemm.ops._noted) == noted, f"block-wise scaled ops fell back to torch: {sorted(tpgemm.ops._noted)}")
    code, msg = tpgemm._C.Plan.can_implement(team, "ag_gemm", 256 * W, 2048, 1024, dtype="e4m3", out_dtype="bf16",
                                             impl="allgather_gemm", scale="block")
    check(code == "Unsupported" and "scale_mode=block" in msg, f"allgather_gemm with block scales: {code} {msg}")


def check_against_torch(g, W):
    import torch.distributed._symmetric_memory as symm
    try:
        symm.enable_symm_mem_for_group(g)
    except Exception as e:  # noqa: BLE001
        log(f"torch symm_mem unavailable: {e}")
        return
    for m, n, k in [(4096, 8192, 8192), (8192, 3584, 8192), (16384, 8192, 2048)]:
        A, w = randn(m // W, k), randn(n, k)
        ours = ops.fused_all_gather_matmul(A, [w.t()], 0, g)
        theirs = torch.ops.symm_mem.fused_all_gather_matmul(A, [w.t()], 0, g)
        check(torch.equal(ours[0], theirs[0]) and rel(ours[1][0], theirs[1][0]) < 1e-2,
              f"ag {m}x{n}x{k} vs symm_mem: {rel(ours[1][0], theirs[1][0]):.2e}")
        A2 = randn(m, k)
        e = rel(ops.fused_matmul_reduce_scatter(A2, w.t(), "sum", 0, g),
                torch.ops.symm_mem.fused_matmul_reduce_scatter(A2, w.t(), "sum", 0, g))
        check(e < 1e-2, f"rs {m}x{n}x{k} vs symm_mem: {e:.2e}")
    log("against torch.ops.symm_mem: done")
    check_serving_async_tp(g, W)


def check_serving_async_tp(g, W):
    """tpgemm.ops.serve_async_tp(): torch.ops.symm_mem's fused ops, called or put in by torch's
    compiler (micro-pipeline TP, W > 1), run tpgemm's kernels: each new shape makes a tpgemm plan."""
    import torch._inductor.config as inductor_config
    from torch.distributed._functional_collectives import all_gather_tensor

    def plans():
        return len([key for key in T._entry(g).plans if key[-1] != "exact"])

    tpgemm.ops.serve_async_tp()
    try:
        A, w = randn(96, 1536), randn(2560, 1536)  # (a shape of its own: a new plan)
        before = plans()
        G, (D,) = torch.ops.symm_mem.fused_all_gather_matmul(A, [w.t()], 0, g)
        ours = ops.fused_all_gather_matmul(A, [w.t()], 0, g)
        check(plans() == before + 1 and torch.equal(G, ours[0]) and torch.equal(D, ours[1][0]),
              f"served ag: {plans() - before} plan(s) made, expected 1; the same bits as torch.ops.tpgemm's")
        A2 = randn(384, 1536)
        before = plans()
        e = rel(torch.ops.symm_mem.fused_matmul_reduce_scatter(A2, w.t(), "sum", 0, g),
                ops.fused_matmul_reduce_scatter(A2, w.t(), "sum", 0, g))
        check(plans() == before + 1 and e < 1e-2, f"served rs: {plans() - before} plan(s) made, rel err {e:.2e}")
        if W > 1:  # torch's compiler puts the fused op in for all_gather -> matmul
            A3, w3 = randn(640 // W, 1024), randn(3072, 1024)
            before = tpgemm.ops.async_tp_calls_served()
            with inductor_config.patch({"_micro_pipeline_tp": True}):
                f = torch.compile(lambda x, b: torch.matmul(all_gather_tensor(x, 0, g), b), fullgraph=True)
                y = f(A3, w3.t())
            served = tpgemm.ops.async_tp_calls_served() - before
            want = gather(A3[None]).reshape(-1, 1024).float() @ w3.float().t()
            check(served == 1 and rel(y, want) < BF16_TOL,
                  f"compiled all_gather -> matmul under micro-pipeline TP: {served} call(s) served by tpgemm "
                  f"(expected 1), rel err {rel(y, want):.2e}")
    finally:
        tpgemm.ops.serve_async_tp(False)
    log("torch's async-TP served by tpgemm: done")


def make_block(H, F, sp, dtype=torch.bfloat16, seq=0):
    torch.manual_seed(1234)  # the same whole layers on every rank
    full = [torch.nn.Linear(H, F, bias=False, device="cuda"), torch.nn.Linear(F, H, bias=False, device="cuda")]
    col = ColumnParallelLinear.from_linear(full[0].to(dtype), sequence_parallel=sp, sequence_dim=seq)
    row = RowParallelLinear.from_linear(full[1].to(dtype), sequence_parallel=sp, sequence_dim=seq)
    return full, torch.nn.Sequential(col, torch.nn.GELU(), row)


def check_modules(W, r):
    """Sequence-parallel along dim 0 ([S, H]), batch first along dim 1 ([B, S, H], batches of one
    and two), and without sequence parallelism."""
    H, F, S = 1024, 4096, 512 * W
    for sp, seq, batch in ((True, 0, 0), (False, 0, 0), (True, 1, 1), (True, 1, 2)):
        what = f"sp={sp} sequence_dim={seq}" + (f" batch={batch}" if batch else "")
        full, block = make_block(H, F, sp, seq=seq)
        ref_block = torch.nn.Sequential(full[0].float(), torch.nn.GELU(), full[1].float())
        torch.manual_seed(99)
        x = torch.randn((batch, S, H) if batch else (S, H), device="cuda")
        xr = x.clone().requires_grad_()
        yr = ref_block(xr)
        yr.square().mean().backward()
        xs = (x.chunk(W, seq)[r] if sp else x).to(torch.bfloat16).clone().requires_grad_()
        y = block(xs)
        want = yr.chunk(W, seq)[r] if sp else yr
        check(y.shape == want.shape and rel(y, want) < BF16_TOL, f"module forward {what}: {rel(y, want):.2e}")
        (y.float().square().sum() / yr.numel()).backward()
        gx = xr.grad.chunk(W, seq)[r] if sp else xr.grad
        check(rel(xs.grad, gx) < 3e-2, f"module input grad {what}: {rel(xs.grad, gx):.2e}")
        gw0 = full[0].weight.grad.chunk(W, 0)[r]
        gw1 = full[1].weight.grad.chunk(W, 1)[r]
        check(rel(block[0].weight.grad, gw0) < 3e-2, f"column weight grad {what}: {rel(block[0].weight.grad, gw0):.2e}")
        check(rel(block[2].weight.grad, gw1) < 3e-2, f"row weight grad {what}: {rel(block[2].weight.grad, gw1):.2e}")
    log("modules: done")


def check_two_streams(g, W, r):
    """Calls of one op shape (one plan) from two streams, nothing joining them: tpgemm orders them
    (NOTE [one plan, several streams]), so every result is right."""
    n = 1 << 20
    xs = [randn(n) for _ in range(6)]
    wants = [gather(x.unsqueeze(0)).float().sum(0) for x in xs]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = []
    def operands(x):  # A [512, 256] and B [256, 512], views of x
        return x.view(-1, 256)[:512], x.view(256, -1)[:, :512]

    for i, x in enumerate(xs):
        with torch.cuda.stream(streams[i % 2]):
            outs.append(torch.ops.tpgemm.all_reduce(x, "sum", g))
            a, b = operands(x)
            outs.append(torch.ops.tpgemm.fused_all_gather_matmul(a, [b], 0, g)[1][0])
    torch.cuda.synchronize()
    for i, x in enumerate(xs):
        got, y = outs[2 * i], outs[2 * i + 1]
        check(rel(got, wants[i]) < BF16_TOL, f"all_reduce on stream {i % 2}, call {i}: {rel(got, wants[i]):.2e}")
        a, b = operands(x)
        want = gather(a).float() @ b.float()
        check(rel(y, want) < BF16_TOL, f"ag_gemm on stream {i % 2}, call {i}: {rel(y, want):.2e}")
    log("calls of one plan from two streams: done")


def check_compile_and_graphs(W, r):
    H, F, S = 1024, 4096, 1024 * W
    _, block = make_block(H, F, True)
    x = randn(S // W, H)
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True)(x)
        check(rel(compiled, eager) < 1e-2, f"compiled block: {rel(compiled, eager):.2e}")
        static_x = x.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            block(static_x)  # the plans exist before capture (they are made on first use)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = block(static_x)
        for _ in range(3):
            fresh = randn(S // W, H)
            static_x.copy_(fresh)
            graph.replay()
            want = block(fresh)
            check(torch.equal(static_y, want), f"graph replay differs from eager: {rel(static_y, want):.2e}")
    log("compile and CUDA graphs: done")


def check_bad_input(g, W, r):
    A, w = randn(256, 512), randn(256, 512)
    A_before = A.clone()
    cases = [
        ("B on the CPU", lambda: ops.fused_matmul_reduce_scatter(A, w.t().cpu(), "sum", 0, g), "B is"),
        ("mismatched K", lambda: ops.matmul_all_reduce(A, randn(256, 256).t(), "sum", g), "expected [K=512"),
        ("mixed dtypes", lambda: ops.fused_all_gather_matmul(A, [w.t().half()], 0, g), "Bs[0] is"),
    ]
    if W > 1:  # (every row count divides among one rank)
        cases.append(("rows not divisible", lambda: ops.fused_matmul_reduce_scatter(randn(W * 8 + 1, 512), w.t(), "sum",
                                                                                    0, g), "must be divisible"))
    if torch.cuda.device_count() > 1:
        other = torch.device("cuda", (r + 1) % torch.cuda.device_count())
        cases.append(("A on another GPU", lambda: ops.matmul_all_reduce(A.to(other), w.t().to(other), "sum", g),
                      "expected cuda:"))
    for what, fn, words in cases:
        try:
            fn()
            check(False, f"{what}: no error")
        except tpgemm.InvalidArgument as e:
            check(words in str(e), f"{what}: message {e}")
    check(torch.equal(A, A_before), "a rejected call changed A")
    log("bad input: done")


def check_deterministic(g, W, r):
    """NOTE [deterministic plans]: under torch.use_deterministic_algorithms the reducing ops run a
    plan whose sums are in a fixed order (never the baseline's NCCL sum), and 20 calls on the same
    operands give the same bits. The shapes are ones whose auto would otherwise sum in NCCL."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        for m, n, k in ((8 * W, 2048, 1024), (2048, 4096, 1024)):
            A, w = randn(m, k), randn(n, k)
            for name, call in (("rs", lambda: ops.fused_matmul_reduce_scatter(A, w.t(), "sum", 0, g)),
                               ("ar", lambda: ops.matmul_all_reduce(A, w.t(), "sum", g))):
                first = call()
                same = all(torch.equal(call(), first) for _ in range(20))
                check(same, f"deterministic {name} {m}x{n}x{k}: 20 calls gave other bits than the first")
        plans = [p for e in T._teams.values() for key, p in e.plans.items() if key[-2] is True and hasattr(p, "impl")]
        # (a team of one sums nothing across ranks: its baseline is a matmul alone, in a fixed order)
        check(plans and (W == 1 or all(p.impl != "baseline" for p in plans)),
              f"deterministic: plans {[(p.description, p.impl) for p in plans]} (none may be the baseline)")
    finally:
        torch.use_deterministic_algorithms(before)


def host_time_per_call(g, W):
    A, w = randn(1024, 1024), randn(1024, 1024)
    rows = []
    for name, fn in (("tpgemm fused_matmul_reduce_scatter", lambda: ops.fused_matmul_reduce_scatter(A, w.t(), "sum", 0, g)),
                     ("tpgemm matmul_all_reduce", lambda: ops.matmul_all_reduce(A[:16], w.t(), "sum", g)),
                     ("torch matmul + reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(
                         torch.empty(1024 // W, 1024, device="cuda", dtype=A.dtype), A @ w.t()))):
        fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(100):
                fn()
            samples.append((time.perf_counter() - t0) / 100 * 1e6)
            torch.cuda.synchronize()
        rows.append(f"host time per eager call, {name}: {statistics.median(samples):.1f} us")
    for row in rows:
        log(row)


def main():
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    W, r, g = dist.get_world_size(), dist.get_rank(), dist.group.WORLD.group_name
    torch.manual_seed(100 + r)
    log(f"tpgemm dist_check: W={W}, torch {torch.__version__}, NCCL {tpgemm.nccl_version()}")
    for fn in (lambda: check_ops(g, W, r), lambda: check_token_counts(g, W, r), lambda: check_fp32_output(g, W, r),
               lambda: check_against_torch(g, W),
               lambda: check_modules(W, r), lambda: check_two_streams(g, W, r),
               lambda: check_compile_and_graphs(W, r), lambda: check_bad_input(g, W, r),
               lambda: check_deterministic(g, W, r), lambda: host_time_per_call(g, W)):
        try:
            fn()
        except Exception as e:  # noqa: BLE001  (a crash is a failure of its own; the next check still runs)
            import traceback
            traceback.print_exc()
            check(False, f"exception: {type(e).__name__}: {e}")
    torch.cuda.synchronize()
    bad = torch.tensor([len(failures)], device="cuda")
    dist.all_reduce(bad)
    log(f"dist_check W={W}: {'PASS' if bad.item() == 0 else f'FAIL ({bad.item()} failed checks over all ranks)'}")
    dist.destroy_process_group()
    sys.exit(1 if bad.item() else 0)


if __name__ == "__main__":
    main()
