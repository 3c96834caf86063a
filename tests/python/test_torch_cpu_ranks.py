"""The torch layer's modules on two CPU ranks (gloo, torch's own path): forward and every
gradient equal nn.Linear's on the whole input, on every rank, sequence-parallel or not. One rank
cannot tell a gradient summed over the group from one rank's share; two can."""
import os
import tempfile
import traceback

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (TPGEMM_NO_TORCH=1?)")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 2


def _layers_match_nn_linear(rank, world, group_name, layout):
    """layout: "seq0" ([S, B, H] split along S), "seq1" ([B, S, H] split along S: sequence_dim=1)
    or "whole" (no sequence parallelism)."""
    from tpgemm.nn import ColumnParallelLinear, RowParallelLinear
    torch.manual_seed(3)  # the same whole layers and input on every rank
    ref1, ref2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
    sequence_parallel, seq = layout != "whole", 1 if layout == "seq1" else 0
    x = torch.randn(8, 2, 16) if seq == 0 else torch.randn(2, 8, 16)
    kw = {"group": group_name, "sequence_parallel": sequence_parallel, "sequence_dim": seq}
    col = ColumnParallelLinear.from_linear(ref1, **kw)
    row = RowParallelLinear.from_linear(ref2, **kw)
    x_in = (x.chunk(world, seq)[rank] if sequence_parallel else x).clone().requires_grad_()
    y = row(torch.relu(col(x_in)))
    x_ref = x.clone().requires_grad_()
    y_ref = ref2(torch.relu(ref1(x_ref)))
    torch.testing.assert_close(y, y_ref.chunk(world, seq)[rank] if sequence_parallel else y_ref)
    # Each rank's loss is its own output's: its rows (their sum over ranks is the whole loss), or
    # the whole output (every rank the same loss, as tensor-parallel training runs it).
    y.square().sum().backward()
    y_ref.square().sum().backward()
    torch.testing.assert_close(x_in.grad, x_ref.grad.chunk(world, seq)[rank] if sequence_parallel else x_ref.grad)
    torch.testing.assert_close(col.weight.grad, ref1.weight.grad.chunk(world, 0)[rank])
    torch.testing.assert_close(col.bias.grad, ref1.bias.grad.chunk(world, 0)[rank])
    torch.testing.assert_close(row.weight.grad, ref2.weight.grad.chunk(world, 1)[rank])
    torch.testing.assert_close(row.bias.grad, ref2.bias.grad)  # whole on every rank


def _fused_projection_and_bad_calls(rank, world, group_name):
    """A fused q/k/v layer sharded part by part; the errors every rank raises alike."""
    import tpgemm
    from tpgemm.nn import ColumnParallelLinear, RowParallelLinear
    torch.manual_seed(4)
    parts = (16, 8, 8)  # q, k, v
    qkv = torch.nn.Linear(16, sum(parts))
    x = torch.randn(8, 16)
    col = ColumnParallelLinear.from_linear(qkv, group=group_name, sequence_parallel=False, parts=parts)
    want = torch.cat([p.chunk(world, -1)[rank] for p in qkv(x).split(parts, -1)], -1)
    torch.testing.assert_close(col(x), want)  # this rank's share of q, then of k, then of v
    for bad in [(16, 8), (16, 8, 7, 1), (15, 9, 8)]:  # short of 32; odd parts
        with pytest.raises(tpgemm.InvalidArgument, match="parts="):
            ColumnParallelLinear.from_linear(qkv, group=group_name, parts=bad)
    with pytest.raises(tpgemm.InvalidArgument, match="sequence_dim=2"):
        RowParallelLinear(16, 16, group=group_name, sequence_dim=2, device="cpu")
    with pytest.raises(tpgemm.InvalidArgument, match="sequence_dim=1 needs at least 3 dims"):
        ColumnParallelLinear(16, 16, group=group_name, sequence_dim=1, device="cpu")(torch.randn(4, 16))
    # A reduce-scatter of rows the group does not divide: tpgemm's error, not the collective's.
    with pytest.raises(tpgemm.InvalidArgument, match="does not divide"):
        torch.ops.tpgemm.fused_matmul_reduce_scatter(torch.randn(5, 16), torch.randn(16, 8), "sum", 0, group_name)


def _ops_as_torch_async_tp(rank, world, group_name):
    """Gathers and scatters along every dim but K's, of batch-first [B, S, H] and [S, B, H]
    activations: the values and the strides of torch's own async-TP ops (their fallbacks, which
    torch's compiler traces), so that either can stand in for the other (NOTE [gather dim moved
    first])."""
    from torch.distributed import _symmetric_memory as symm
    torch.manual_seed(5 + rank)
    B = torch.randn(16, 12)
    for shape, dim in (((3, 4, 16), 1), ((4, 3, 16), 0), ((2, 3, 4, 16), 2), ((1, 4, 16), 1)):
        A = torch.randn(shape)
        for return_A in (True, False):
            got = torch.ops.tpgemm.fused_all_gather_matmul(A, [B, B[:, :4]], dim, group_name, return_A=return_A)
            want = symm._fused_all_gather_matmul_fallback(A, [B, B[:, :4]], dim, group_name, return_A=return_A)
            for g, w in zip([got[0]] + got[1], [want[0]] + want[1]):
                if w is None:
                    assert g is None
                    continue
                torch.testing.assert_close(g, w)
                if w.dim() < 3 or w.shape[:dim].numel() > 1:  # (dims of one entry: any stride)
                    assert g.stride() == w.stride(), f"ag {shape} dim {dim}: strides {g.stride()}, torch's {w.stride()}"
        A = torch.randn(shape[:dim] + (shape[dim] * world,) + shape[dim + 1:])
        got = torch.ops.tpgemm.fused_matmul_reduce_scatter(A, B, "sum", dim, group_name)
        want = symm._fused_matmul_reduce_scatter_fallback(A, B, "sum", dim, group_name)
        torch.testing.assert_close(got, want)
        assert got.is_contiguous() and want.is_contiguous()


def _rank(rank, world, store_path, case, result_dir):
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        import tpgemm.ops  # noqa: F401
        if case == "extras":
            _fused_projection_and_bad_calls(rank, world, dist.group.WORLD.group_name)
        elif case == "ops":
            _ops_as_torch_async_tp(rank, world, dist.group.WORLD.group_name)
        else:
            _layers_match_nn_linear(rank, world, dist.group.WORLD.group_name, case)
        outcome = "ok"
    except Exception:  # noqa: BLE001 (reported to the parent, which fails the test with it)
        outcome = traceback.format_exc()
    with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
        f.write(outcome)
    dist.destroy_process_group()


@pytest.mark.parametrize("case", ["seq0", "seq1", "whole", "extras", "ops"])
def test_layers_on_two_ranks(case):
    """seq0 / seq1 / whole: the layers match nn.Linear (_layers_match_nn_linear); extras: a fused
    projection's shards and the errors of bad layers and calls; ops: gathers and scatters along
    any dim as torch's async-TP ops give them (_ops_as_torch_async_tp)."""
    d = tempfile.mkdtemp()
    mp.spawn(_rank, args=(WORLD, os.path.join(d, "store"), case, d), nprocs=WORLD)
    for r in range(WORLD):
        with open(os.path.join(d, f"rank{r}")) as f:
            outcome = f.read()
        assert outcome == "ok", f"rank {r}:\n{outcome}"
