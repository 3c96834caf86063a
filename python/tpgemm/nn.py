"""Tensor-parallel linear layers on tpgemm's ops, with forward and backward through autograd.

Weights have nn.Linear's layout ([out_features, in_features], shards thereof), so a model's
checkpoint shards load as they are. With sequence parallelism (the default) activations between
the layers are split along the sequence: their first dimension by default (Megatron's [s, b, h]
layout), or the second with sequence_dim=1 (batch first, [b, s, h], as torchtitan and Hugging Face
models hold them):

    ColumnParallelLinear  x [S/W, ..., in]  -> AllGather+GEMM        -> y [S, ..., out/W]
    RowParallelLinear     x [S, ..., in/W]  -> GEMM+ReduceScatter    -> y [S/W, ..., out]

and their gradients are the dual ops: the input gradient of AllGather+GEMM is a
GEMM+ReduceScatter, that of GEMM+ReduceScatter an AllGather+GEMM (which also returns the gathered
output gradient for the weight gradient); the weight gradient of the column layer uses the
gathered input its forward kept. Without sequence parallelism (sequence_parallel=False) the input
of the column layer is whole on every rank, its input gradient a GEMM+AllReduce, and the row
layer's output a GEMM+AllReduce. Batch first with a batch above one, the sequence's dim goes
first for the ops (ops.py, NOTE [gather dim moved first]): the column layer's output is a view of
[S, B, out/W] rows, which the row layer reads in place.

Plans are made on the first call with each shape (collectively: every rank runs the same model),
or ahead of time by prepare(tokens); never during CUDA-graph capture.
"""
import math

import torch
from torch import nn

from . import _torch as T
from . import ops as _ops  # (also registers torch.ops.tpgemm)
from ._errors import InvalidArgument, Unsupported

_tp = torch.ops.tpgemm


class _Direct:
    """tpgemm's op kernels called straight, without torch's dispatcher."""
    fused_all_gather_matmul = staticmethod(_ops._ag_kernel)
    fused_matmul_reduce_scatter = staticmethod(_ops._rs_kernel)
    matmul_all_reduce = staticmethod(_ops._ar_kernel)


def _k(x):
    """The op kernels: straight for a plain tensor in eager mode (the dispatcher is a share of an
    eager call's host time: bench/host_time.py); the registered torch.ops while torch.compile
    traces, and for anything a dispatch mode or a tensor subclass (FakeTensor, make_fx) handles."""
    if torch.compiler.is_compiling():  # (first: what follows is not for tracing)
        return _tp
    return _Direct if type(x) is torch.Tensor and torch._C._len_torch_dispatch_stack() == 0 else _tp


def _no_grad_needed(x, w):
    return not torch.is_grad_enabled() or not (x.requires_grad or w.requires_grad)


def _group_name(group):
    return T.resolve_group(group).group_name


def _flat(t, seq=0):
    """t's rows, the sequence's dim `seq` first: with seq=1 the gathered activations and their
    gradients lie so (ops.py, NOTE [gather dim moved first]), and both sides of a weight gradient
    take their rows in the same order, without a copy."""
    return t.movedim(seq, 0).reshape(-1, t.shape[-1])


class _AllGatherLinear(torch.autograd.Function):
    """y = AllGather(x) @ w.T; dx = ReduceScatter(dy @ w); dw = dy.T @ AllGather(x). Along dim
    `seq` (the sequence's) of x."""

    @staticmethod
    def forward(x, w, group_name, keep_gathered, seq):
        xg, (y,) = _k(x).fused_all_gather_matmul(x, [w.t()], seq, group_name, return_A=keep_gathered)
        return y, xg

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, w, group_name, _, seq = inputs
        ctx.save_for_backward(w, output[1])
        ctx.group_name, ctx.seq = group_name, seq
        ctx.mark_non_differentiable(output[1]) if output[1] is not None else None

    @staticmethod
    def backward(ctx, dy, _dxg):
        w, xg = ctx.saved_tensors
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = _k(dy).fused_matmul_reduce_scatter(dy, w, "sum", ctx.seq, ctx.group_name)
        if ctx.needs_input_grad[1]:
            dw = _flat(dy, ctx.seq).t() @ _flat(xg, ctx.seq)
        return dx, dw, None, None, None


class _SavesOperands(torch.autograd.Function):
    """forward(x, w, group_name[, seq]): backward gets x and w saved, the group's name and the
    sequence's dim."""

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, group_name = inputs[:3]
        ctx.save_for_backward(x, w)
        ctx.group_name = group_name
        ctx.seq = inputs[3] if len(inputs) > 3 else 0


class _MatmulReduceScatter(_SavesOperands):
    """y = ReduceScatter(x @ w.T); dx = AllGather(dy) @ w; dw = AllGather(dy).T @ x. Along dim
    `seq` (the sequence's)."""

    @staticmethod
    def forward(x, w, group_name, seq):
        return _k(x).fused_matmul_reduce_scatter(x, w.t(), "sum", seq, group_name)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dyg, (dx,) = _k(dy).fused_all_gather_matmul(dy, [w], ctx.seq, ctx.group_name,
                                                    return_A=ctx.needs_input_grad[1])
        dw = _flat(dyg, ctx.seq).t() @ _flat(x, ctx.seq) if ctx.needs_input_grad[1] else None
        return (dx if ctx.needs_input_grad[0] else None), dw, None, None


class _MatmulAllReduce(_SavesOperands):
    """y = AllReduce(x @ w.T) (x split along its last dim); dx = dy @ w; dw = dy.T @ x."""

    @staticmethod
    def forward(x, w, group_name):
        return _k(x).matmul_all_reduce(x, w.t(), "sum", group_name)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx = dy @ w if ctx.needs_input_grad[0] else None
        dw = _flat(dy).t() @ _flat(x) if ctx.needs_input_grad[1] else None
        return dx, dw, None


class _LinearAllReduceGrad(_SavesOperands):
    """y = x @ w.T (x whole on every rank, w this rank's rows); dx = AllReduce(dy @ w)."""

    @staticmethod
    def forward(x, w, group_name):
        return x @ w.t()

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx = _k(dy).matmul_all_reduce(dy.contiguous(), w, "sum", ctx.group_name) if ctx.needs_input_grad[0] else None
        dw = _flat(dy).t() @ _flat(x) if ctx.needs_input_grad[1] else None
        return dx, dw, None


class _SumGradOverRanks(torch.autograd.Function):
    """t in forward; the sum of its gradient over the group in backward: a parameter every rank
    holds whole but applies to its own tokens only (the sequence-parallel row layer's bias), whose
    gradient is then the whole layer's on every rank, as nn.Linear's."""

    @staticmethod
    def forward(t, group_name):
        return t.view_as(t)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.group_name = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return _tp.all_reduce(g.contiguous(), "sum", ctx.group_name), None


class _ParallelLinear(nn.Module):
    def __init__(self, in_features, out_features, bias, group, sequence_parallel, device, dtype, shard_out,
                 sequence_dim):
        super().__init__()
        if sequence_dim not in (0, 1):
            raise InvalidArgument(f"sequence_dim={sequence_dim!r}: expected 0 ([s, b, h] activations) or 1 ([b, s, h])")
        self.sequence_dim = sequence_dim
        self.group_name = _group_name(group)
        self.world_size = T.world_size(self.group_name)
        split = out_features if shard_out else in_features
        if split % self.world_size:
            raise InvalidArgument(f"{'out' if shard_out else 'in'}_features={split}: expected a multiple of the "
                                  f"group's size {self.world_size}")
        self.in_features, self.out_features = in_features, out_features
        self.sequence_parallel = sequence_parallel
        shape = (out_features // self.world_size, in_features) if shard_out else (out_features, in_features // self.world_size)
        kw = {"device": device if device is not None else torch.device("cuda", torch.cuda.current_device()),
              "dtype": dtype if dtype is not None else torch.bfloat16}
        self.weight = nn.Parameter(torch.empty(shape, **kw))
        self.bias = nn.Parameter(torch.empty(shape[0] if shard_out else out_features, **kw)) if bias else None
        # nn.Linear's default initialisation, with the whole layer's fan-in.
        bound = 1.0 / math.sqrt(in_features)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    @classmethod
    def from_linear(cls, linear, *, group=None, sequence_parallel=True, sequence_dim=0, parts=None):
        """This rank's shard of a whole nn.Linear, the same on every rank: the column layer's rows
        of the weight and bias, the row layer's columns of the weight (its bias is whole).

        `parts`: the sizes of the projections a fused layer stacks along the split features (the
        column layer's outputs, e.g. (q, k, v) or (gate, up); the row layer's inputs), each split
        across the ranks on its own, so that every rank holds its share of each: without it, a
        fused layer's rank 0 would hold all of q, say. Each part must be a multiple of the group's
        size; the shard's features are each part's share in turn."""
        m = cls(linear.in_features, linear.out_features, linear.bias is not None, group=group,
                sequence_parallel=sequence_parallel, device=linear.weight.device, dtype=linear.weight.dtype,
                sequence_dim=sequence_dim)
        r = torch.distributed.get_rank(T.resolve_group(m.group_name))
        by_rows = isinstance(m, ColumnParallelLinear)
        dim = 0 if by_rows else 1
        total = linear.weight.shape[dim]
        parts = (total,) if parts is None else tuple(parts)
        if sum(parts) != total or any(not isinstance(p, int) or p <= 0 or p % m.world_size for p in parts):
            raise InvalidArgument(f"parts={parts}: expected positive multiples of the group's size {m.world_size} "
                                  f"summing to the layer's {'out' if by_rows else 'in'}_features={total}")

        def shard(t, d):
            return torch.cat([p.chunk(m.world_size, d)[r] for p in t.split(parts, d)], d)

        with torch.no_grad():
            m.weight.copy_(shard(linear.weight, dim))
            if m.bias is not None:
                m.bias.copy_(shard(linear.bias, 0) if by_rows else linear.bias)
        return m

    def _seq(self, x):
        """The sequence's dim of x, checked: x must have a dim before its features there."""
        if x.dim() < self.sequence_dim + 2:
            raise InvalidArgument(f"x has shape {tuple(x.shape)}: sequence_dim={self.sequence_dim} needs at least "
                                  f"{self.sequence_dim + 2} dims ([b, s, ..., h])")
        return self.sequence_dim

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"world_size={self.world_size}, sequence_parallel={self.sequence_parallel}, "
                f"sequence_dim={self.sequence_dim}")

    def _served_by_torch(self):
        """Whether calls run torch's path whatever their shape (prepare makes no plan for them)."""
        return self.weight.dtype not in T.DTYPES or self.weight.device.type != "cuda"


class ColumnParallelLinear(_ParallelLinear):
    """y = x @ W.T with W split by rows (output features) across the group: weight is this rank's
    [out_features / W, in_features] block. Sequence-parallel: x [S/W, ..., in] -> y [S, ..., out/W]
    (AllGather+GEMM; with sequence_dim=1, x [B, S/W, ..., in] -> y [B, S, ..., out/W]); otherwise
    x [S, ..., in] -> y [S, ..., out/W]. Defaults as tpgemm serves them, not nn.Linear's: no bias,
    bfloat16, the current CUDA device."""

    def __init__(self, in_features, out_features, bias=False, *, group=None, sequence_parallel=True, sequence_dim=0,
                 device=None, dtype=None):
        super().__init__(in_features, out_features, bias, group, sequence_parallel, device, dtype, shard_out=True,
                         sequence_dim=sequence_dim)


    def forward(self, x):
        if _no_grad_needed(x, self.weight):  # inference: the op alone, without autograd's bookkeeping
            # (the plan prepare() makes: A gathered back where the weight may want gradients)
            y = (_k(x).fused_all_gather_matmul(x, [self.weight.t()], self._seq(x), self.group_name,
                                              return_A=self.weight.requires_grad)[1][0]
                 if self.sequence_parallel else x @ self.weight.t())
        elif self.sequence_parallel:
            y, _ = _AllGatherLinear.apply(x, self.weight, self.group_name, self.weight.requires_grad, self._seq(x))
        else:
            y = _LinearAllReduceGrad.apply(x, self.weight, self.group_name)
        return y + self.bias if self.bias is not None else y

    def prepare(self, tokens, *, backward=True):
        """Makes the plans a call with `tokens` rows in all (every token of the batch: S x B, of
        which each rank holds S x B / W in sequence parallel) needs, forward and (with backward)
        the gradients' too, so that the first call can be captured. A problem tpgemm does not
        serve makes no plan (ops._plan: the reason is kept and named once): its calls take
        torch's path, as they would without prepare."""
        if self._served_by_torch():
            return  # (nothing to make)
        dt = T.DTYPES[self.weight.dtype]
        n, k = self.weight.shape
        if self.sequence_parallel:
            _ops._plan(self.group_name, "ag_gemm", tokens, n, k, dt, "nk",
                       return_gathered_a=self.weight.requires_grad)
            if backward:
                _ops._plan(self.group_name, "gemm_rs", tokens, k, n, dt, "kn")
        elif backward:
            _ops._plan(self.group_name, "gemm_ar", tokens, k, n, dt, "kn")


class RowParallelLinear(_ParallelLinear):
    """y = x @ W.T with W split by columns (input features): weight is this rank's
    [out_features, in_features / W] block. Sequence-parallel: x [S, ..., in/W] -> y [S/W, ..., out]
    (GEMM+ReduceScatter; with sequence_dim=1, x [B, S, ..., in/W] -> y [B, S/W, ..., out]); otherwise
    -> y [S, ..., out] (GEMM+AllReduce). Defaults as ColumnParallelLinear's."""

    def __init__(self, in_features, out_features, bias=False, *, group=None, sequence_parallel=True, sequence_dim=0,
                 device=None, dtype=None):
        super().__init__(in_features, out_features, bias, group, sequence_parallel, device, dtype, shard_out=False,
                         sequence_dim=sequence_dim)


    def forward(self, x):
        if _no_grad_needed(x, self.weight):  # inference: the op alone, without autograd's bookkeeping
            y = (_k(x).fused_matmul_reduce_scatter(x, self.weight.t(), "sum", self._seq(x), self.group_name)
                 if self.sequence_parallel else _k(x).matmul_all_reduce(x, self.weight.t(), "sum", self.group_name))
        elif self.sequence_parallel:
            y = _MatmulReduceScatter.apply(x, self.weight, self.group_name, self._seq(x))
        else:
            y = _MatmulAllReduce.apply(x, self.weight, self.group_name)
        if self.bias is None:
            return y
        if self.sequence_parallel and torch.is_grad_enabled() and self.bias.requires_grad:
            return y + _SumGradOverRanks.apply(self.bias, self.group_name)
        return y + self.bias

    def prepare(self, tokens, *, backward=True):
        """As ColumnParallelLinear.prepare."""
        if self._served_by_torch():
            return  # (nothing to make)
        dt = T.DTYPES[self.weight.dtype]
        n, k = self.weight.shape
        if self.sequence_parallel:
            _ops._plan(self.group_name, "gemm_rs", tokens, n, k, dt, "nk")
            if backward:
                _ops._plan(self.group_name, "ag_gemm", tokens, k, n, dt, "kn",
                           return_gathered_a=self.weight.requires_grad)
                if self.bias is not None and self.bias.requires_grad:  # (_SumGradOverRanks)
                    try:
                        T.allreduce_plan(self.group_name, self.bias.numel(), dt)
                    except Unsupported:
                        pass  # (its calls take torch's path, as they would without prepare)
        else:
            _ops._plan(self.group_name, "gemm_ar", tokens, n, k, dt, "nk")



def prepare(model, tokens, *, backward=True):
    """Makes every plan the tpgemm layers of `model` need for `tokens` rows (see
    ColumnParallelLinear.prepare): collective, before capturing the model in a CUDA graph."""
    for m in model.modules():
        if isinstance(m, _ParallelLinear):
            m.prepare(tokens, backward=backward)
