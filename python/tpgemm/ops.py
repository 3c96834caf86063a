"""torch.ops.tpgemm: tensor-parallel matmuls as torch operators.

    fused_all_gather_matmul(Tensor A, Tensor[] Bs, int gather_dim, str group_name, *, bool return_A=True)
        -> (Tensor?, Tensor[])
    fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim, str group_name) -> Tensor
    matmul_all_reduce(Tensor A, Tensor B, str reduce_op, str group_name) -> Tensor
    all_reduce(Tensor input, str reduce_op, str group_name) -> Tensor            (out of place)

    fused_all_gather_scaled_matmul(...), fused_scaled_matmul_reduce_scatter(...)   (FP8: torch's schemas)

These four have exactly the schemas and results of torch.ops.symm_mem's ops of the same names:
a model switches by changing the namespace. Each B is [K, N] (an nn.Linear weight W is passed as
W.t(), which tpgemm reads in place). reduce_op is "sum" or "avg". Every op has a fake (meta)
implementation, so torch.compile(fullgraph=True) traces it, and its CUDA kernel only enqueues work
on the current stream, so CUDA graphs capture it once its plan exists (tpgemm.prepare).

tpgemm serves a gather along dim 0 and a scatter along dim 0 or the last dim (the bf16 / fp16 ops
also along a later dim with only 1s before it: [1, S, H] split along S). Where it cannot serve a
call (another dim; a dtype other than bf16 / fp16; CPU tensors; a shape tpgemm refuses as
Unsupported) the op runs torch's own path, NCCL collective and matmul, and warns once per reason.
"""
import math
import warnings

import torch

from . import _torch as T
from ._errors import InvalidArgument, Unsupported

_lib = torch.library.Library("tpgemm", "DEF")
_lib.define("fused_all_gather_matmul(Tensor A, Tensor[] Bs, int gather_dim, str group_name, *, bool return_A=True) "
            "-> (Tensor?, Tensor[])")
_lib.define("fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim, str group_name) -> Tensor")
_lib.define("matmul_all_reduce(Tensor A, Tensor B, str reduce_op, str group_name) -> Tensor")
_lib.define("all_reduce(Tensor input, str reduce_op, str group_name) -> Tensor")
_lib.define("fused_all_gather_scaled_matmul(Tensor A, Tensor[] Bs, Tensor A_scale, Tensor[] B_scales, int gather_dim, "
            "str group_name, Tensor?[] biases, Tensor?[] result_scales, ScalarType?[] out_dtypes, "
            "bool[] use_fast_accum) -> (Tensor, Tensor[])")
_lib.define("fused_scaled_matmul_reduce_scatter(Tensor A, Tensor B, Tensor A_scale, Tensor B_scale, str reduce_op, "
            "int orig_scatter_dim, int scatter_dim_after_maybe_reshape, str group_name, SymInt[]? output_shape, "
            "Tensor? bias=None, Tensor? result_scale=None, ScalarType? out_dtype=None, bool use_fast_accum=False) "
            "-> Tensor")

_c10d = torch.ops._c10d_functional
_noted = set()
_unsupported_plans = {}  # plan key -> the reason tpgemm gave, so later calls fall back at once


def _note_fallback(op, why):
    if (op, why) not in _noted:
        _noted.add((op, why))
        path = ("NCCL's all-reduce" if op == "all_reduce" else
                "its NCCL collective and matmul, or for a symm_mem op that serve_async_tp serves, torch's kernel")
        warnings.warn(f"tpgemm.{op}: {why}; running torch's own path ({path}) instead", stacklevel=3)


def _alpha(reduce_op, world):
    if reduce_op == "sum":
        return 1.0
    if reduce_op == "avg":
        return 1.0 / world
    raise InvalidArgument(f"reduce_op={reduce_op!r}: expected 'sum' or 'avg'")


def _dim(name, value, ndim):
    """`value` as a dim of a tensor of `ndim` dims, from -ndim up (negative counts from the end, as
    torch's dims do); out of range raises InvalidArgument, as torch's own ops raise ValueError."""
    if not -ndim <= value < ndim:
        raise InvalidArgument(f"{name}={value}: expected a dim of a {ndim}-D tensor, from {-ndim} to {ndim - 1}")
    return value % ndim


def _why_not(A, Bs, names, K=None):
    """Why tpgemm's kernels cannot take these operands ('' if they can: then torch's path runs).
    Operands no path can take raise InvalidArgument, naming the argument. K: B's rows (A's last
    dim unless given: a gather along A's last dim widens it)."""
    if not isinstance(A, torch.Tensor) or A.dim() == 0:
        what = "a 0-d tensor" if isinstance(A, torch.Tensor) else type(A).__name__
        raise InvalidArgument(f"A is {what}: expected a tensor [..., K] of at least one dim")
    K = A.shape[-1] if K is None else K
    for name, B in zip(names, Bs):
        if not isinstance(B, torch.Tensor) or B.dim() != 2 or B.dtype != A.dtype or B.device != A.device:
            what = f"{tuple(B.shape)} {B.dtype} on {B.device}" if isinstance(B, torch.Tensor) else type(B).__name__
            raise InvalidArgument(f"{name} is {what}: expected a 2-D [K, N] tensor of A's dtype {A.dtype} on "
                                  f"A's device {A.device}")
        if B.shape[0] != K:
            raise InvalidArgument(f"{name} has shape {tuple(B.shape)}: expected [K={K}, N] to match A "
                                  f"{tuple(A.shape)}")
    if A.device.type != "cuda":
        return f"A is on {A.device}"
    if A.dtype not in T.DTYPES:
        return f"dtype {A.dtype} (tpgemm takes bfloat16 and float16)"
    if A.dim() < 2:
        return f"A has {A.dim()} dimension(s)"
    if A.numel() == 0 or any(B.numel() == 0 for B in Bs):  # (a plan's extents are at least 1)
        return "an empty operand"
    return ""


def _rows(A):
    """A as [rows, K] without a copy where it is contiguous."""
    return A.reshape(-1, A.shape[-1]) if A.is_contiguous() else A.contiguous().view(-1, A.shape[-1])


def _row_stride(A):
    """The elements between A's rows as tpgemm reads A ([rows, K] over its leading dims), passed as
    the plan's lda: K where A is contiguous; where its last dim is contiguous and its rows equally
    spaced a whole number of 16 bytes apart (a slice A[..., :K] of a wider tensor, or a split of a
    fused projection's output), their stride, read in place; else None: A is copied into rows."""
    K = A.shape[-1]
    if A.is_contiguous():
        return K
    if A.stride(-1) != 1:
        return None
    dims = [(n, s) for n, s in zip(A.shape[:-1], A.stride()[:-1]) if n != 1]
    if not dims:
        return K
    if any(s != s2 * n2 for (_, s), (n2, s2) in zip(dims, dims[1:])):
        return None
    step = dims[-1][1]
    return step if step >= K and step * A.element_size() % 16 == 0 else None


def _lda(A):
    """The plan's lda for A (0: packed), and whether A must be copied into rows each call."""
    step = _row_stride(A)
    return (0 if step in (None, A.shape[-1]) else step), step is None


def _b_operand(B):
    """B [K, N] as tpgemm reads it: row-major [K, N] ('kn'), or in place as the [N, K] row-major
    matrix it is a transpose of ('nk': W.t() of an nn.Linear weight)."""
    if B.is_contiguous():
        return B, "kn"
    if B.t().is_contiguous():
        return B, "nk"
    return B.contiguous(), "kn"


def _plan(group_name, op, m, n, k, dtype, layout, note=True, **kw):
    """The op's plan, or None where tpgemm answered Unsupported (then the reason is noted, unless
    `note` is off)."""
    key = (group_name, op, m, n, k, dtype, layout, tuple(sorted(kw.items())), T.impl_for(op),
           torch.are_deterministic_algorithms_enabled())
    why = _unsupported_plans.get(key)
    if why is None:
        try:
            return T.plan(group_name, op, m, n, k, dtype, layout, **kw)
        except Unsupported as e:  # agreed on every rank: they all fall back alike
            why = _unsupported_plans[key] = str(e)
    if note:
        _note_fallback(op, why)
    return None


def _plan_reading_a(A, group_name, op, m, n, k, dtype, layout, **kw):
    """The plan for A as it lies, and how a call passes A (for _Call): (plan, a_rows, a_ld). Rows
    equally spaced are read in place at their stride (a_ld) where the implementation takes one;
    otherwise A is copied into rows each call (a_rows)."""
    lda, a_rows = _lda(A)
    if lda:
        p = _plan(group_name, op, m, n, k, dtype, layout, note=False, lda=lda, **kw)
        if p is not None:
            return p, False, lda
        a_rows = True  # (an implementation asked for that takes packed rows only)
    return _plan(group_name, op, m, n, k, dtype, layout, **kw), a_rows, 0


# ---- torch's own path ------------------------------------------------------------------------

def _ag_torch(A, Bs, gather_dim, group_name, return_A=True):
    W = T.world_size(group_name)
    gd = _dim("gather_dim", gather_dim, A.dim())
    gathered = _c10d.wait_tensor(_c10d.all_gather_into_tensor(A.movedim(gd, 0).contiguous(), W, group_name))
    if _moved_first(A, gd):  # (the outputs' layout of tpgemm's kernels: NOTE [gather dim moved first])
        return (gathered.movedim(0, gd) if return_A else None), [torch.matmul(gathered, B).movedim(0, gd) for B in Bs]
    A_full = gathered.movedim(0, gd)
    outs = [torch.matmul(A_full, B) for B in Bs]
    return (A_full.contiguous() if return_A else None), outs


def _reduce_scatter_torch(C, reduce_op, scatter_dim, group_name):
    """C reduced over the group and scattered along `scatter_dim`, by torch's collective."""
    W = T.world_size(group_name)
    sd = _dim("scatter_dim", scatter_dim, C.dim())
    if C.shape[sd] % W:  # (torch's collective would fail with a message of its own, or not at all)
        raise InvalidArgument(f"scatter_dim={scatter_dim}: the product's dim {sd} has {C.shape[sd]} entries, which "
                              f"the group's size {W} does not divide (the product is {tuple(C.shape)})")
    out = _c10d.wait_tensor(_c10d.reduce_scatter_tensor(C.movedim(sd, 0).contiguous(), reduce_op, W, group_name))
    return out.movedim(0, sd).contiguous()


def _rs_torch(A, B, reduce_op, scatter_dim, group_name):
    return _reduce_scatter_torch(torch.matmul(A, B), reduce_op, scatter_dim, group_name)


def _ar_torch(A, B, reduce_op, group_name):
    return _c10d.wait_tensor(_c10d.all_reduce(torch.matmul(A, B), reduce_op, group_name))


def _all_reduce_torch(input, reduce_op, group_name):
    return _c10d.wait_tensor(_c10d.all_reduce(input.contiguous(), reduce_op, group_name))


# ---- tpgemm's path ---------------------------------------------------------------------------
#
# NOTE [calls worked out once]
# A model calls an op with the same shapes, strides, dtypes and devices over and over; only the
# data changes. Everything that follows from those (the argument checks, whether tpgemm serves the
# call, the plan, the output's shape) is worked out on a call's first appearance and kept under
# that key, so a later call costs a dictionary lookup, the outputs' allocation, the alignment of
# its addresses (which the key does not fix) and Plan.run. The key holds everything the checks
# read, so a call that would fail them never finds a kept entry, and whether torch asks for
# deterministic algorithms (NOTE [deterministic plans]). set_impl() forgets them.

class _Call:
    """What a call of one key runs: `plan` (None: torch's path) and the outputs' shapes."""
    __slots__ = ("plan", "shape", "gathered_shape", "a_rows", "b_copy", "a_ld", "moved")

    def __init__(self, plan=None, shape=None, gathered_shape=None, a_rows=False, b_copy=False, a_ld=0):
        self.plan = plan
        self.shape = shape
        self.gathered_shape = gathered_shape
        self.a_rows = a_rows    # A is copied into rows each call (its rows not equally spaced)
        self.b_copy = b_copy    # B is neither [K, N] nor [N, K] row-major: copied each call
        self.a_ld = a_ld        # > 0: A's rows are read in place this far apart (the plan's lda)
        self.moved = 0          # > 0: this dim of A goes first, and back in the outputs (NOTE [gather dim moved first])


TORCH_PATH = _Call()
_calls = {}
_MAX_CALLS = 4096  # distinct keys kept (a serving loop's token counts); then they start over


def forget_calls():
    _calls.clear()


def _layout(t):
    return (t.shape, t.stride(), t.dtype, t.device) if isinstance(t, torch.Tensor) else (type(t),)


def _kept(key, work_out):
    key = (key, torch.are_deterministic_algorithms_enabled())  # which plans (NOTE [deterministic plans])
    c = _calls.get(key)
    if c is None:
        c = work_out()
        if len(_calls) >= _MAX_CALLS:
            _calls.clear()
        _calls[key] = c
    return c


def _operands(c, A, B):
    """A's rows and B as the plan reads them, for call `c`: A's dim `c.moved` first where it is one
    (NOTE [gather dim moved first]). Rows at a stride from an address that is not 16-byte aligned
    (a slice at an odd offset; the call's key does not fix the offset) are copied to an aligned
    buffer at the same stride; packed rows, and B, to a fresh tensor."""
    if c.moved:
        A = A.movedim(c.moved, 0)
    if c.a_rows:
        A = _rows(A)
    elif c.a_ld and A.data_ptr() % 16:
        A = torch.empty(A.shape[:-1] + (c.a_ld,), dtype=A.dtype, device=A.device)[..., :A.shape[-1]].copy_(A)
    if A.data_ptr() % 16:  # packed rows at an odd offset: copied, as the strided ones above
        A = A.clone(memory_format=torch.contiguous_format)
    if c.b_copy:
        B = B.contiguous()
    if B.data_ptr() % 16:  # a view at an odd offset: a fresh tensor of the same strides is aligned
        B = B.clone()
    return A, B


def _rows_dim(A, dim):
    """Whether splitting A along `dim` splits its rows (A's dims but the last, flattened) into
    blocks of whole rows in order: dim 0, or a later one (not K's) with only 1s before it (torch's
    [1, S, H] activations, sequence-parallel along dim 1)."""
    d = dim % A.dim()
    return d == 0 or (d < A.dim() - 1 and all(x == 1 for x in A.shape[:d]))


# NOTE [gather dim moved first]
# A gather or scatter along a dim of A that does not split its rows into whole blocks (the
# sequence of batch-first activations, [B, S/W, H] with B > 1) runs on the dim moved first, as
# torch's async-TP ops do: A [S/W, B, H] is rows (copied into that order once, unless it lies so:
# a gathered output below, say), each rank's a block of them. The AllGather's outputs come back as
# views with that dim moved back (torch's symm_mem op returns the same strides, and torch's path
# and the fake here do too); the ReduceScatter's is copied back contiguous, as torch's op returns it.
def _moved_first(A, dim):
    """Whether a gather or scatter along `dim` of A runs on that dim moved first (NOTE [gather dim
    moved first]): neither a dim _rows_dim takes nor A's last."""
    d = dim % A.dim()
    return d < A.dim() - 1 and not _rows_dim(A, d)


def _ag_call(A, Bs, gather_dim, group_name, return_A):
    gd = _dim("gather_dim", gather_dim, A.dim())
    K = A.shape[-1] * (T.world_size(group_name) if gd == A.dim() - 1 else 1)  # a gather along K widens it
    why = _why_not(A, Bs, [f"Bs[{i}]" for i in range(len(Bs))], K)
    why = why or ("" if gd < A.dim() - 1 else f"gather_dim={gather_dim}")
    why = why or ("" if Bs else "no B")
    if why:
        _note_fallback("fused_all_gather_matmul", why)
        return TORCH_PATH
    moved = gd if _moved_first(A, gd) else 0
    c = _ag_plan_call(A.movedim(gd, 0) if moved else A, Bs[0], group_name, T.DTYPES[A.dtype], return_A or len(Bs) > 1,
                      gather_dim=0 if moved else gd)
    if c.plan is not None:
        c.moved = moved
    return c


def _ag_plan_call(A, B, group_name, dtype, gathered, gather_dim=0, **kw):
    """The call of an all-gather whose operands tpgemm takes: A's rows gathered along `gather_dim`
    (one _rows_dim takes), times B; `kw` goes to the plan."""
    W = T.world_size(group_name)
    T.check_tensor(A, "A", device=T.team_device(group_name))
    K, lead = A.shape[-1], tuple(A.shape[:-1])
    B0, layout = _b_operand(B)
    N = B0.shape[1]
    p, a_rows, a_ld = _plan_reading_a(A, group_name, "ag_gemm", math.prod(lead) * W, N, K, dtype, layout,
                                      return_gathered_a=gathered, **kw)
    if p is None:
        return TORCH_PATH
    rows = lead[:gather_dim] + (lead[gather_dim] * W,) + lead[gather_dim + 1:]
    return _Call(p, rows + (N,), rows + (K,) if gathered else None, a_rows, B0 is not B, a_ld)


# NOTE [torch path hook]: `torch_path` (no arguments), where given, runs a call tpgemm does not
# serve instead of tpgemm's own torch path: serve_async_tp (_async_tp.py) passes torch's own fused
# kernel for the call, so that what tpgemm does not take runs as it ran before.
def _ag_kernel(A, Bs, gather_dim, group_name, return_A=True, torch_path=None):
    key = ("ag", group_name, gather_dim, return_A, _layout(A)) + tuple(_layout(B) for B in Bs)
    c = _kept(key, lambda: _ag_call(A, Bs, gather_dim, group_name, return_A))
    if c.plan is None:
        return torch_path() if torch_path is not None else _ag_torch(A, Bs, gather_dim, group_name, return_A)
    A2, B0 = _operands(c, A, Bs[0])
    D = torch.empty(c.shape, dtype=A.dtype, device=A.device)
    G = torch.empty(c.gathered_shape, dtype=A.dtype, device=A.device) if c.gathered_shape else None
    c.plan.run(T.address(A2, "A"), T.address(B0, "Bs[0]"), 0, T.address(D, "D"),
               T.address(G, "A_gathered") if G is not None else 0, T.call_stream(c.plan, A.device.index))
    outs = [D] + [torch.matmul(G, B) for B in Bs[1:]]
    if c.moved:
        outs = [o.movedim(0, c.moved) for o in outs]
        G = G.movedim(0, c.moved) if G is not None else None
    return (G if return_A else None), outs


def _rs_call(A, B, reduce_op, scatter_dim, group_name):
    W = T.world_size(group_name)
    alpha = _alpha(reduce_op, W)
    why = _why_not(A, [B], ["B"])
    sd = _dim("scatter_dim", scatter_dim, max(A.dim(), 1))
    rows = _rows_dim(A, sd) if A.dim() > 1 else sd == 0
    if why:
        _note_fallback("fused_matmul_reduce_scatter", why)
        return TORCH_PATH
    if _moved_first(A, sd):
        if A.shape[sd] % W:
            raise InvalidArgument(f"A has shape {tuple(A.shape)}: its scatter dim {sd} ({A.shape[sd]}) must be divisible "
                                  f"by the group's size {W}")
        A1 = A.movedim(sd, 0)
        c = _rs_plan_call(A1, B, tuple(A1.shape[:-1]), f"A has shape {tuple(A.shape)}", True, group_name,
                          T.DTYPES[A.dtype], alpha=alpha)
        if c.plan is not None:
            c.moved = sd
        return c
    return _rs_plan_call(A, B, tuple(A.shape[:-1]), f"A has shape {tuple(A.shape)}", rows, group_name,
                         T.DTYPES[A.dtype], row_dim=sd if rows else 0, alpha=alpha)


def _rs_plan_call(A, B, lead, lead_from, rows, group_name, dtype, row_dim=0, **kw):
    """The call of a reduce-scatter whose operands tpgemm takes: A's rows (as `lead`, D's leading
    dims, which `lead_from` names) times B, scattered along D's dim `row_dim` (`rows`: one
    _rows_dim takes) or its last; `kw` goes to the plan."""
    W = T.world_size(group_name)
    T.check_tensor(A, "A", device=T.team_device(group_name))
    K = A.shape[-1]
    B2, layout = _b_operand(B)
    N, M = B2.shape[1], math.prod(lead)
    if rows:
        if lead[row_dim] % W:
            raise InvalidArgument(f"{lead_from}: its scatter dim {row_dim} ({lead[row_dim]}) must be divisible by the "
                                  f"group's size {W}")
        shape, shard = lead[:row_dim] + (lead[row_dim] // W,) + lead[row_dim + 1:] + (N,), "m"
    else:
        if N % W:
            raise InvalidArgument(f"B has shape {tuple(B.shape)}: N={N} must be divisible by the group's size {W} "
                                  "to scatter the last dim")
        shape, shard = lead + (N // W,), "n"
    p, a_rows, a_ld = _plan_reading_a(A, group_name, "gemm_rs", M, N, K, dtype, layout, shard_dim=shard, **kw)
    if p is None:
        return TORCH_PATH
    return _Call(p, shape, None, a_rows, B2 is not B, a_ld)


def _rs_kernel(A, B, reduce_op, scatter_dim, group_name, torch_path=None):  # (NOTE [torch path hook])
    key = ("rs", group_name, reduce_op, scatter_dim, _layout(A), _layout(B))
    c = _kept(key, lambda: _rs_call(A, B, reduce_op, scatter_dim, group_name))
    if c.plan is None:
        return torch_path() if torch_path is not None else _rs_torch(A, B, reduce_op, scatter_dim, group_name)
    A2, B2 = _operands(c, A, B)
    D = torch.empty(c.shape, dtype=A.dtype, device=A.device)
    c.plan.run(T.address(A2, "A"), T.address(B2, "B"), 0, T.address(D, "D"), 0, T.call_stream(c.plan, A.device.index))
    return D.movedim(0, c.moved).contiguous() if c.moved else D


def _ar_call(A, B, reduce_op, group_name):
    W = T.world_size(group_name)
    alpha = _alpha(reduce_op, W)
    why = _why_not(A, [B], ["B"])
    if why:
        _note_fallback("matmul_all_reduce", why)
        return TORCH_PATH
    T.check_tensor(A, "A", device=T.team_device(group_name))
    K, lead = A.shape[-1], tuple(A.shape[:-1])
    B2, layout = _b_operand(B)
    N = B2.shape[1]
    p, a_rows, a_ld = _plan_reading_a(A, group_name, "gemm_ar", math.prod(lead), N, K, T.DTYPES[A.dtype], layout,
                                      alpha=alpha)
    if p is None:
        return TORCH_PATH
    return _Call(p, lead + (N,), None, a_rows, B2 is not B, a_ld)


def _ar_kernel(A, B, reduce_op, group_name):
    key = ("ar", group_name, reduce_op, _layout(A), _layout(B))
    c = _kept(key, lambda: _ar_call(A, B, reduce_op, group_name))
    if c.plan is None:
        return _ar_torch(A, B, reduce_op, group_name)
    A2, B2 = _operands(c, A, B)
    D = torch.empty(c.shape, dtype=A.dtype, device=A.device)
    c.plan.run(T.address(A2, "A"), T.address(B2, "B"), 0, T.address(D, "D"), 0, T.call_stream(c.plan, A.device.index))
    return D


def _all_reduce_call(input, reduce_op, group_name):
    W = T.world_size(group_name)
    _alpha(reduce_op, W)
    why = f"input is on {input.device}" if input.device.type != "cuda" else ""
    why = why or ("" if input.dtype in T.DTYPES else f"dtype {input.dtype} (tpgemm takes bfloat16 and float16)")
    if why:
        _note_fallback("all_reduce", why)
        return TORCH_PATH
    T.check_tensor(input, "input", device=T.team_device(group_name))
    try:
        p = T.allreduce_plan(group_name, input.numel(), T.DTYPES[input.dtype])
    except Unsupported as e:
        _note_fallback("all_reduce", str(e))
        return TORCH_PATH
    return _Call(p, None, None, not input.is_contiguous(), False)


def _all_reduce_kernel(input, reduce_op, group_name):
    if not isinstance(input, torch.Tensor):
        raise InvalidArgument(f"input: expected a torch.Tensor, got {type(input).__name__}")
    if input.numel() == 0:  # nothing to sum (reduce_op still checked)
        _alpha(reduce_op, T.world_size(group_name))
        return input.clone()
    key = ("all_reduce", group_name, reduce_op, _layout(input))
    c = _kept(key, lambda: _all_reduce_call(input, reduce_op, group_name))
    if c.plan is None:
        return _all_reduce_torch(input, reduce_op, group_name)
    x = input.contiguous() if c.a_rows else input
    if x.data_ptr() % 16:  # a view at an odd offset: the kernels move 16-byte vectors (a fresh copy is aligned)
        x = x.clone()
    out = torch.empty_like(x)
    c.plan.run(T.address(x, "input"), T.address(out, "output"), T.call_stream(c.plan, input.device.index), x.numel())
    return out.div_(T.world_size(group_name)) if reduce_op == "avg" else out


# The same kernels take CPU tensors: checked alike, they run torch's own path (tpgemm's kernels
# are CUDA only).
for _name, _kernel in (("fused_all_gather_matmul", _ag_kernel), ("fused_matmul_reduce_scatter", _rs_kernel),
                       ("matmul_all_reduce", _ar_kernel), ("all_reduce", _all_reduce_kernel)):
    _lib.impl(_name, _kernel, "CUDA")
    _lib.impl(_name, _kernel, "CPU")


# ---- shapes only (FakeTensor / meta), for torch.compile ------------------------------------------

@torch.library.register_fake("tpgemm::fused_all_gather_matmul")
def _ag_fake(A, Bs, gather_dim, group_name, return_A=True):
    W = T.world_size(group_name)
    gd = _dim("gather_dim", gather_dim, A.dim())
    if _moved_first(A, gd):  # views of the gathered dim moved back (NOTE [gather dim moved first])
        shape = list(A.movedim(gd, 0).shape)
        shape[0] *= W
        A_full = A.new_empty(shape).movedim(0, gd)
        return (A_full if return_A else None), [A.new_empty(shape[:-1] + [B.shape[1]]).movedim(0, gd) for B in Bs]
    shape = list(A.shape)
    shape[gd] *= W
    A_full = A.new_empty(shape)
    return (A_full if return_A else None), [A.new_empty(shape[:-1] + [B.shape[1]]) for B in Bs]


@torch.library.register_fake("tpgemm::fused_matmul_reduce_scatter")
def _rs_fake(A, B, reduce_op, scatter_dim, group_name):
    W = T.world_size(group_name)
    shape = list(A.shape[:-1]) + [B.shape[1]]
    shape[_dim("scatter_dim", scatter_dim, len(shape))] //= W
    return A.new_empty(shape)


@torch.library.register_fake("tpgemm::matmul_all_reduce")
def _ar_fake(A, B, reduce_op, group_name):
    return A.new_empty(list(A.shape[:-1]) + [B.shape[1]])


@torch.library.register_fake("tpgemm::all_reduce")
def _all_reduce_fake(input, reduce_op, group_name):
    return torch.empty_like(input, memory_format=torch.contiguous_format)


# The scaled (FP8) ops' kernels, in their own module.
from . import _scaled_ops  # noqa: E402,F401
# torch's async-TP on these kernels (torch.ops.symm_mem's ops), on request.
from ._async_tp import async_tp_calls_served, serve_async_tp, serving_async_tp  # noqa: E402,F401
