"""The scaled (FP8) ops of torch.ops.tpgemm (the library and the plain ops are tpgemm.ops'):

    fused_all_gather_scaled_matmul(Tensor A, Tensor[] Bs, Tensor A_scale, Tensor[] B_scales, int gather_dim,
                                   str group_name, Tensor?[] biases, Tensor?[] result_scales,
                                   ScalarType?[] out_dtypes, bool[] use_fast_accum) -> (Tensor, Tensor[])
    fused_scaled_matmul_reduce_scatter(Tensor A, Tensor B, Tensor A_scale, Tensor B_scale, str reduce_op,
                                       int orig_scatter_dim, int scatter_dim_after_maybe_reshape,
                                       str group_name, SymInt[]? output_shape, ...) -> Tensor
"""
import math

import torch

from . import _torch as T
from ._errors import InvalidArgument, Unsupported
from .ops import (TORCH_PATH, _ag_plan_call, _alpha, _c10d, _dim, _kept, _layout, _lib, _note_fallback, _operands,
                  _reduce_scatter_torch, _rs_plan_call)

# ---- the scaled (FP8) ops ----------------------------------------------------------------------
#
# torch.ops.symm_mem's fused_all_gather_scaled_matmul and fused_scaled_matmul_reduce_scatter, with
# their schemas: A and B in FP8 with dequantisation scales, as torch._scaled_mm takes them.
# tpgemm serves FP8 operands (float8_e4m3fn, or float8_e5m2 beside an e4m3 one: cuBLASLt has no
# e5m2 x e5m2 matmul) with tensor-wise scales (one fp32 each, on the GPU), row-wise or block-wise
# ones (_scales_kind; block-wise: e4m3, K a multiple of 128), an out_dtype of bf16, fp16 or fp32, no
# bias or result scale, B as the transpose of an [N, K] row-major weight;
# use_fast_accum is a permission tpgemm does not take (it accumulates in full). Everything else
# runs torch's path: the collective and torch._scaled_mm. A tensor-wise A_scale is, for torch, the
# scale of the whole gathered A (the ranks share it); tpgemm's gather carries each rank's own with
# its rows, which is the same where they are shared.

# A ScalarType[] argument reaches a Python kernel as c10::ScalarType numbers (c10/core/ScalarType.h);
# the output types a scaled matmul can have, back to torch.dtype.
_SCALAR_TYPES = {5: torch.float16, 6: torch.float32, 15: torch.bfloat16}
if hasattr(torch, "float8_e4m3fn"):
    _SCALAR_TYPES.update({23: torch.float8_e5m2, 24: torch.float8_e4m3fn})


def _dtype(x):
    if x is None or isinstance(x, torch.dtype):
        return x
    if x not in _SCALAR_TYPES:
        raise InvalidArgument(f"out_dtype {x!r}: expected float32, bfloat16, float16 or an FP8 type")
    return _SCALAR_TYPES[x]


def _scales_kind(A, B, A_scale, B_scale):
    """How tpgemm reads the scales of A (this rank's rows) and B ([K, N]), or None where it cannot:
    "tensor" (one fp32 each), "row" (torch._scaled_mm's row-wise mode: A_scale one per row of A,
    shaped as A's rows x 1; B_scale one per column of B, shaped 1 x N) or "block" (_block_scales);
    fp32 on A's device."""
    def fp32_here(s):
        return isinstance(s, torch.Tensor) and s.dtype == torch.float32 and s.device == A.device
    if not (fp32_here(A_scale) and fp32_here(B_scale)):
        return None
    if A_scale.numel() == 1 and B_scale.numel() == 1:
        return "tensor"
    if (A_scale.dim() == A.dim() and tuple(A_scale.shape) == tuple(A.shape[:-1]) + (1,) and B.dim() == 2
            and tuple(B_scale.shape) == (1, B.shape[1])):
        return "row"
    if _block_scales(A, B, A_scale, B_scale):
        return "block"
    return None


def _size_stride(t, dim, size, stride):
    """Dimension `dim` of t has `size` elements, `stride` apart where there are several (torch's
    check of scaled_mm's scales)."""
    return t.shape[dim] == size and (size == 1 or t.stride(dim) == stride)


def _block_scales(A, B, A_scale, B_scale):
    """torch._scaled_mm's block-wise scales, laid out as tpgemm's scale mode "block" reads them: A
    [rows, K] with BlockWise1x128 ones, A_scale (rows, K/128) strided (1, rows): K block by K block,
    the rows in order; B = weight.t() ([K, N]) with BlockWise128x128 ones, B_scale (K/128, N/128)
    (or (L4, N/128), as torch's _scaled_mm_v2 shapes it) strided (1, L4), L4 = K/128 rounded up to 4:
    per 128 rows of the weight its K blocks, L4 apart (the 16-byte aligned stride torch checks and
    cuBLASLt reads), or K/128 apart (packed: what torch releases that check the exact stride take;
    _aligned_block_scales pads them). Block counts round up (ceil)."""
    if A.dim() != 2 or B.dim() != 2 or A_scale.dim() != 2 or B_scale.dim() != 2:
        return False
    rows, k, n = A.shape[0], A.shape[1], B.shape[1]
    kb = -(-k // 128)
    l4 = -(-kb // 4) * 4
    nb = -(-n // 128)
    return (_size_stride(A_scale, 0, rows, 1) and _size_stride(A_scale, 1, kb, rows)
            and B_scale.shape[0] in (kb, l4) and (B_scale.shape[0] == 1 or B_scale.stride(0) == 1)
            and (_size_stride(B_scale, 1, nb, l4) or _size_stride(B_scale, 1, nb, B_scale.shape[0])))


def _torch_block_mm_check(k, where):
    """Raises Unsupported where torch._scaled_mm would run block-wise scales with K/128 not a multiple
    of 4: torch 2.11 asks for B's scales K/128 apart and hands them to cuBLASLt, which reads them
    L4 apart, so the sums come out wrong (dist_check's K = 384 case measured it: relative errors of
    0.4 to 1e6). tpgemm's own matmul pads them itself and is right; the Bs after the first of an
    all-gather, and torch's path, are torch's."""
    kb = -(-k // 128)
    if kb % 4:
        raise Unsupported(f"{where}: block-wise scales with K={k} ({kb} blocks of 128, not a multiple of 4) would "
                          "run in torch._scaled_mm, whose sums are wrong there; expected K a multiple of 512, or one B")


def _b_dtype(A, B):
    """B's FP8 type for the plan where it differs from A's ('' where they match)."""
    return "" if B.dtype == A.dtype else T.FP8_DTYPES[B.dtype]


def _aligned_block_scales(A_scale, B_scale):
    """Block-wise scales as tpgemm reads them (_block_scales), from 16-byte aligned addresses: A's
    with their strides kept; B's with their K blocks L4 apart. Those already so are passed as they
    are; one at an offset, or B's packed K/128 apart, is copied into a fresh tensor laid out so."""
    sa = A_scale if A_scale.data_ptr() % 16 == 0 else torch.empty_strided(
        A_scale.shape, A_scale.stride(), dtype=A_scale.dtype, device=A_scale.device).copy_(A_scale)
    kb, nb = B_scale.shape
    l4 = -(-kb // 4) * 4
    if B_scale.data_ptr() % 16 == 0 and (nb == 1 or B_scale.stride(1) == l4):
        return sa, B_scale
    sb = torch.empty(nb, l4, dtype=B_scale.dtype, device=B_scale.device)[:, :kb].t()
    return sa, sb.copy_(B_scale)


def _gather_block_scales(s, group_name):
    """A's block-wise scales (rows, K/128), strided (1, rows), gathered with the rows: (W rows, K/128),
    strided (1, W rows), as torch._scaled_mm takes them for the gathered A."""
    W = T.world_size(group_name)
    rows, kb = s.shape
    g = _gather_rows(s.t().contiguous(), group_name).view(W, kb, rows)  # each rank's K blocks of rows
    return g.permute(1, 0, 2).reshape(kb, W * rows).t()


def _aligned_scales(*scales):
    """The scales as cuBLASLt reads them: packed, each from a 16-byte aligned address. A tensor of
    its own is (torch aligns storages to 256 bytes); a view at an offset, or strided, is copied. The
    caller holds the copies until the call is enqueued (then the caching allocator's stream order
    keeps them)."""
    packed = [s if s.is_contiguous() else s.contiguous() for s in scales]
    return [s if s.data_ptr() % 16 == 0 else s.clone() for s in packed]


def _scale_mode(A, A_scale, gd, W):
    """How the all-gather's A_scale reads, in torch's order (its
    _check_and_verify_fp8_all_gather_scale_mode): one per row of the shard (also where the shard has
    one row), one for the tensor, or one per row of the gathered A."""
    full = list(A.shape)
    full[gd] *= W
    if tuple(A_scale.shape[:-1]) == tuple(A.shape[:-1]) and A_scale.shape[-1] == 1:
        return "row_sharded"
    if A_scale.numel() == 1:
        return "tensor"
    if list(A_scale.shape[:-1]) == full[:-1]:
        return "row_replicated"
    raise InvalidArgument(f"A_scale has shape {tuple(A_scale.shape)}: expected one scale (tensor-wise), "
                          f"{tuple(A.shape[:-1]) + (1,)} (row-wise, this rank's rows) or "
                          f"{tuple(full[:-1]) + (1,)} (row-wise, the gathered rows)")


def _why_not_scaled(A, B, A_scale, B_scale, bias, result_scale, out_dtype):
    if not isinstance(B, torch.Tensor) or B.device != A.device:
        where = B.device if isinstance(B, torch.Tensor) else type(B).__name__
        raise InvalidArgument(f"B is on {where}: expected a tensor on A's device {A.device}")
    if A.device.type != "cuda":
        return f"A is on {A.device}"
    if A.dtype not in T.FP8_DTYPES or B.dtype not in T.FP8_DTYPES or A.dtype == B.dtype == torch.float8_e5m2:
        return (f"A {A.dtype} and B {B.dtype} (tpgemm's scaled ops take float8_e4m3fn, or float8_e5m2 beside "
                "float8_e4m3fn)")
    if _scales_kind(A, B, A_scale, B_scale) is None:
        return ("scales other than fp32 on A's device, one per operand, row-wise (A's rows x 1 and 1 x N) or "
                "block-wise (torch._scaled_mm's BlockWise1x128 for A and BlockWise128x128 for B): "
                f"A_scale {tuple(A_scale.shape)}, B_scale {tuple(B_scale.shape)}")
    if bias is not None or result_scale is not None:
        return "a bias or a result scale"
    if out_dtype not in T.OUT_DTYPES:
        return f"out_dtype {out_dtype} (tpgemm writes bfloat16, float16 or float32)"
    if A.dim() < 2 or B.dim() != 2 or B.shape[0] != A.shape[-1]:
        return f"A {tuple(A.shape)} and B {tuple(B.shape)}"
    return ""


def _gather_rows(x, group_name):
    """x gathered along dim 0 (as bytes where x is FP8: not every backend moves FP8)."""
    W = T.world_size(group_name)
    raw = x.contiguous()
    if raw.dtype in T.FP8_DTYPES:
        raw = raw.view(torch.uint8)
    out = _c10d.wait_tensor(_c10d.all_gather_into_tensor(raw, W, group_name))
    return out.view(x.dtype) if x.dtype in T.FP8_DTYPES else out


def _ag_scaled_torch(A, Bs, A_scale, B_scales, gather_dim, group_name, biases, result_scales, out_dtypes,
                     use_fast_accum):
    W, gd = T.world_size(group_name), _dim("gather_dim", gather_dim, A.dim())
    if gd == 0 and _scales_kind(A, Bs[0], A_scale, B_scales[0]) == "block":  # the rows' blocks gathered with them
        _torch_block_mm_check(A.shape[-1], "fused_all_gather_scaled_matmul on torch's path")
        A_full, scale = _gather_rows(A, group_name), _gather_block_scales(A_scale, group_name)
        return A_full, [torch._scaled_mm(A_full, B, scale, bs, bias, rs, out_dtype=od, use_fast_accum=fast)
                        for B, bs, bias, rs, od, fast in zip(Bs, B_scales, biases, result_scales, out_dtypes,
                                                             use_fast_accum)]
    mode = _scale_mode(A, A_scale, gd, W)
    # As torch's path: the shards gathered rank by rank, gather_dim moved in front, then rows.
    A_gd = _gather_rows(A, group_name).view(W, *A.shape).movedim(gd + 1, 1).flatten(0, 1)
    scale = A_scale
    if mode == "row_sharded":  # each rank's rows' scales, gathered alike
        scale = _gather_rows(A_scale, group_name).view(W, *A_scale.shape).movedim(gd + 1, 1).flatten(0, -2)
    elif mode == "row_replicated":
        scale = A_scale.movedim(gd, 0).flatten(0, -2)
    A2 = A_gd.flatten(0, -2)
    outs = [torch._scaled_mm(A2, B, scale, bs, bias, rs, out_dtype=od, use_fast_accum=fast)
            .unflatten(0, A_gd.shape[:-1]).movedim(0, gd).contiguous()
            for B, bs, bias, rs, od, fast in zip(Bs, B_scales, biases, result_scales, out_dtypes, use_fast_accum)]
    return A_gd.movedim(0, gd).contiguous(), outs


def _check_scaled_lists(Bs, B_scales, biases, result_scales, out_dtypes, use_fast_accum):
    for name, v in (("B_scales", B_scales), ("biases", biases), ("result_scales", result_scales),
                    ("out_dtypes", out_dtypes), ("use_fast_accum", use_fast_accum)):
        if len(v) != len(Bs):
            raise InvalidArgument(f"{name} has {len(v)} entries: expected one per B ({len(Bs)})")
    if not Bs:
        raise InvalidArgument("Bs is empty: expected at least one B")


def _check_scaled_bs(A, Bs, B_scales, K):
    """Every B and B scale of an all-gather, before any collective: what no path takes raises here,
    naming it, instead of in torch._scaled_mm after the gather. K: B's rows."""
    for i, (B, s) in enumerate(zip(Bs, B_scales)):
        if (not isinstance(B, torch.Tensor) or B.dim() != 2 or B.shape[0] != K or B.device != A.device
                or B.dtype not in T.FP8_DTYPES):
            what = f"{tuple(B.shape)} {B.dtype} on {B.device}" if isinstance(B, torch.Tensor) else type(B).__name__
            raise InvalidArgument(f"Bs[{i}] is {what}: expected a 2-D [K={K}, N] FP8 tensor on A's device {A.device}")
        if not isinstance(s, torch.Tensor) or s.device != A.device:
            what = f"on {s.device}" if isinstance(s, torch.Tensor) else type(s).__name__
            raise InvalidArgument(f"B_scales[{i}] is {what}: expected a tensor on A's device {A.device}")


def _ag_scaled_call(A, Bs, A_scale, B_scales, gather_dim, group_name, biases, result_scales, out_dtypes):
    why = _why_not_scaled(A, Bs[0], A_scale, B_scales[0], biases[0], result_scales[0], out_dtypes[0])
    why = why or ("" if _dim("gather_dim", gather_dim, A.dim()) == 0 else f"gather_dim={gather_dim}")
    # One row per rank and one scale: tpgemm reads it as the tensor's, torch as the row's
    # (_scale_mode), which differ for the Bs after the first (they multiply the gathered rows).
    if (not why and len(Bs) > 1 and _scales_kind(A, Bs[0], A_scale, B_scales[0]) == "tensor"
            and _scale_mode(A, A_scale, 0, T.world_size(group_name)) == "row_sharded"):
        why = "several Bs with one row and one A scale per rank"
    if why:
        _note_fallback("fused_all_gather_scaled_matmul", why)
        return TORCH_PATH
    return _ag_plan_call(A, Bs[0], group_name, T.FP8_DTYPES[A.dtype], True, out_dtype=T.OUT_DTYPES[out_dtypes[0]],
                         scale=_scales_kind(A, Bs[0], A_scale, B_scales[0]), b_dtype=_b_dtype(A, Bs[0]))


def _ag_scaled_kernel(A, Bs, A_scale, B_scales, gather_dim, group_name, biases, result_scales, out_dtypes,
                      use_fast_accum, torch_path=None):  # (NOTE [torch path hook] in ops.py)
    out_dtypes = [_dtype(x) for x in out_dtypes]
    _check_scaled_lists(Bs, B_scales, biases, result_scales, out_dtypes, use_fast_accum)
    if isinstance(A, torch.Tensor) and A.dim() >= 1:
        gd = _dim("gather_dim", gather_dim, A.dim())
        _check_scaled_bs(A, Bs, B_scales, A.shape[-1] * (T.world_size(group_name) if gd == A.dim() - 1 else 1))
    key = (("ag_scaled", group_name, gather_dim, _layout(A), _layout(A_scale), tuple(out_dtypes),
            tuple(b is None for b in biases), tuple(r is None for r in result_scales))
           + tuple(_layout(B) for B in Bs) + tuple(_layout(s) for s in B_scales))
    c = _kept(key, lambda: _ag_scaled_call(A, Bs, A_scale, B_scales, gather_dim, group_name, biases, result_scales,
                                           out_dtypes))
    if c.plan is None:
        if torch_path is not None:
            return torch_path()
        return _ag_scaled_torch(A, Bs, A_scale, B_scales, gather_dim, group_name, biases, result_scales, out_dtypes,
                                use_fast_accum)
    A2, B0 = _operands(c, A, Bs[0])
    D = torch.empty(c.shape, dtype=out_dtypes[0], device=A.device)
    G = torch.empty(c.gathered_shape, dtype=A.dtype, device=A.device)
    # The other Bs (if any) multiply the gathered A in torch: row-wise and block-wise, with the
    # gathered rows' scales.
    kind = _scales_kind(A, Bs[0], A_scale, B_scales[0])
    G_scale = A_scale
    if len(Bs) > 1 and kind == "row":
        G_scale = _gather_rows(A_scale.flatten(0, -2), group_name)
    elif len(Bs) > 1 and kind == "block":
        _torch_block_mm_check(A.shape[-1], "fused_all_gather_scaled_matmul with more than one B")
        G_scale = _gather_block_scales(A_scale, group_name)
    sa, sb = (_aligned_block_scales if kind == "block" else _aligned_scales)(A_scale, B_scales[0])
    c.plan.run(T.address(A2, "A"), T.address(B0, "Bs[0]"), 0, T.address(D, "D"), T.address(G, "A_gathered"),
               T.call_stream(c.plan, A.device.index), sa.data_ptr(), sb.data_ptr())
    G2 = G.flatten(0, -2)
    outs = [D] + [torch._scaled_mm(G2, B, G_scale, bs, bias, rs, out_dtype=od, use_fast_accum=fast)
                  .unflatten(0, G.shape[:-1])
                  for B, bs, bias, rs, od, fast in zip(Bs[1:], B_scales[1:], biases[1:], result_scales[1:],
                                                       out_dtypes[1:], use_fast_accum[1:])]
    return G, outs


def _rs_scaled_torch(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, group_name, output_shape, bias,
                     result_scale, out_dtype, use_fast_accum):
    if A_scale.numel() > 1 and tuple(A_scale.shape[:-1]) != tuple(A.shape[:-1]):
        raise InvalidArgument(f"A_scale has shape {tuple(A_scale.shape)}: expected one scale (tensor-wise) or "
                              f"{tuple(A.shape[:-1]) + (1,)} (row-wise)")
    scale = A_scale.flatten(0, -2).contiguous() if A_scale.numel() > 1 else A_scale
    if _scales_kind(A, B, A_scale, B_scale) == "block":  # (its strides are the layout)
        _torch_block_mm_check(A.shape[-1], "fused_scaled_matmul_reduce_scatter on torch's path")
        scale = A_scale
    C = torch._scaled_mm(A.flatten(0, -2).contiguous(), B, scale, B_scale, bias, result_scale, out_dtype=out_dtype,
                         use_fast_accum=use_fast_accum)
    return _reduce_scatter_torch(C.view(*output_shape[:-1], B.shape[1]), reduce_op, orig_scatter_dim, group_name)


def _rs_scaled_call(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, group_name, output_shape, bias, result_scale,
                    out_dtype):
    W = T.world_size(group_name)
    alpha = _alpha(reduce_op, W)
    why = _why_not_scaled(A, B, A_scale, B_scale, bias, result_scale, out_dtype)
    out_shape = tuple(output_shape[:-1]) + (B.shape[1],)
    sd = _dim("orig_scatter_dim", orig_scatter_dim, len(out_shape))
    why = why or ("" if sd in (0, len(out_shape) - 1) else f"orig_scatter_dim={orig_scatter_dim}")
    why = why or ("" if math.prod(out_shape[:-1]) == math.prod(A.shape[:-1]) else f"output_shape {output_shape}")
    if why:
        _note_fallback("fused_scaled_matmul_reduce_scatter", why)
        return TORCH_PATH
    return _rs_plan_call(A, B, out_shape[:-1], f"output_shape {list(output_shape)}", sd == 0, group_name,
                         T.FP8_DTYPES[A.dtype], alpha=alpha, out_dtype=T.OUT_DTYPES[out_dtype],
                         scale=_scales_kind(A, B, A_scale, B_scale), b_dtype=_b_dtype(A, B))


def _rs_scaled_kernel(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, scatter_dim_after_maybe_reshape,
                      group_name, output_shape, bias=None, result_scale=None, out_dtype=None, use_fast_accum=False,
                      torch_path=None):  # (NOTE [torch path hook] in ops.py)
    out_dtype = _dtype(out_dtype)
    if output_shape is None:
        output_shape = list(A.shape[:-1]) + [B.shape[1]]
    key = ("rs_scaled", group_name, reduce_op, orig_scatter_dim, tuple(output_shape), _layout(A), _layout(B),
           _layout(A_scale), _layout(B_scale), bias is None, result_scale is None, out_dtype)
    c = _kept(key, lambda: _rs_scaled_call(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, group_name,
                                           output_shape, bias, result_scale, out_dtype))
    if c.plan is None:
        if torch_path is not None:
            return torch_path()
        return _rs_scaled_torch(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, group_name, output_shape, bias,
                                result_scale, out_dtype, use_fast_accum)
    A2, B2 = _operands(c, A, B)
    D = torch.empty(c.shape, dtype=out_dtype, device=A.device)
    block = _scales_kind(A, B, A_scale, B_scale) == "block"
    sa, sb = (_aligned_block_scales if block else _aligned_scales)(A_scale, B_scale)
    c.plan.run(T.address(A2, "A"), T.address(B2, "B"), 0, T.address(D, "D"), 0,
               T.call_stream(c.plan, A.device.index), sa.data_ptr(), sb.data_ptr())
    return D


# The same kernels take CPU tensors: checked alike, they run torch's own path.
for _name, _kernel in (("fused_all_gather_scaled_matmul", _ag_scaled_kernel),
                       ("fused_scaled_matmul_reduce_scatter", _rs_scaled_kernel)):
    _lib.impl(_name, _kernel, "CUDA")
    _lib.impl(_name, _kernel, "CPU")


# ---- shapes only (FakeTensor / meta), for torch.compile ------------------------------------------

@torch.library.register_fake("tpgemm::fused_all_gather_scaled_matmul")
def _ag_scaled_fake(A, Bs, A_scale, B_scales, gather_dim, group_name, biases, result_scales, out_dtypes,
                    use_fast_accum):
    W = T.world_size(group_name)
    gd = _dim("gather_dim", gather_dim, A.dim())
    shape = list(A.shape)
    shape[gd] *= W
    return A.new_empty(shape), [A.new_empty(shape[:-1] + [B.shape[1]], dtype=_dtype(od) or A.dtype)
                                for B, od in zip(Bs, out_dtypes)]


@torch.library.register_fake("tpgemm::fused_scaled_matmul_reduce_scatter")
def _rs_scaled_fake(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, scatter_dim_after_maybe_reshape, group_name,
                    output_shape, bias=None, result_scale=None, out_dtype=None, use_fast_accum=False):
    W = T.world_size(group_name)
    shape = (list(output_shape[:-1]) if output_shape is not None else list(A.shape[:-1])) + [B.shape[1]]
    shape[_dim("orig_scatter_dim", orig_scatter_dim, len(shape))] //= W
    return A.new_empty(shape, dtype=_dtype(out_dtype) or A.dtype)
