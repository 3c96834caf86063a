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


def _layers_match_nn_linear(rank, world, group_name, sequence_parallel):
    from tpgemm.nn import ColumnParallelLinear, RowParallelLinear
    torch.manual_seed(3)  # the same whole layers and input on every rank
    ref1, ref2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
    x = torch.randn(8, 2, 16)
    col = ColumnParallelLinear.from_linear(ref1, group=group_name, sequence_parallel=sequence_parallel)
    row = RowParallelLinear.from_linear(ref2, group=group_name, sequence_parallel=sequence_parallel)
    x_in = (x.chunk(world, 0)[rank] if sequence_parallel else x).clone().requires_grad_()
    y = row(torch.relu(col(x_in)))
    x_ref = x.clone().requires_grad_()
    y_ref = ref2(torch.relu(ref1(x_ref)))
    torch.testing.assert_close(y, y_ref.chunk(world, 0)[rank] if sequence_parallel else y_ref)
    # Each rank's loss is its own output's: its rows (their sum over ranks is the whole loss), or
    # the whole output (every rank the same loss, as tensor-parallel training runs it).
    y.square().sum().backward()
    y_ref.square().sum().backward()
    torch.testing.assert_close(x_in.grad, x_ref.grad.chunk(world, 0)[rank] if sequence_parallel else x_ref.grad)
    torch.testing.assert_close(col.weight.grad, ref1.weight.grad.chunk(world, 0)[rank])
    torch.testing.assert_close(col.bias.grad, ref1.bias.grad.chunk(world, 0)[rank])
    torch.testing.assert_close(row.weight.grad, ref2.weight.grad.chunk(world, 1)[rank])
    torch.testing.assert_close(row.bias.grad, ref2.bias.grad)  # whole on every rank


def _rank(rank, world, store_path, sequence_parallel, result_dir):
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        import tpgemm.ops  # noqa: F401
        _layers_match_nn_linear(rank, world, dist.group.WORLD.group_name, sequence_parallel)
        outcome = "ok"
    except Exception:  # noqa: BLE001 (reported to the parent, which fails the test with it)
        outcome = traceback.format_exc()
    with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
        f.write(outcome)
    dist.destroy_process_group()


@pytest.mark.parametrize("sequence_parallel", [True, False])
def test_layers_on_two_ranks_match_nn_linear(sequence_parallel):
    d = tempfile.mkdtemp()
    mp.spawn(_rank, args=(WORLD, os.path.join(d, "store"), sequence_parallel, d), nprocs=WORLD)
    for r in range(WORLD):
        with open(os.path.join(d, f"rank{r}")) as f:
            outcome = f.read()
        assert outcome == "ok", f"rank {r}:\n{outcome}"
