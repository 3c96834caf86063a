"""The torch layer without a GPU: op registration (torch.library.opcheck), fake (meta) shapes,
torch.compile tracing, and the modules' autograd wiring, on a one-rank gloo group whose CPU tensors
take torch's own path."""
import os
import tempfile
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (TPGEMM_NO_TORCH=1?)")
import torch.distributed as dist  # noqa: E402

import tpgemm  # noqa: E402
import tpgemm.ops  # noqa: E402,F401
from tpgemm import _torch as T  # noqa: E402
from tpgemm.nn import ColumnParallelLinear, RowParallelLinear  # noqa: E402

ops = torch.ops.tpgemm


@pytest.fixture(scope="module")
def group_name():
    if not dist.is_initialized():
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield dist.group.WORLD.group_name


def test_schemas_match_torch_symm_mem():
    import torch.distributed._symmetric_memory  # noqa: F401  (defines torch.ops.symm_mem)
    for name in ("fused_all_gather_matmul", "fused_matmul_reduce_scatter", "fused_all_gather_scaled_matmul",
                 "fused_scaled_matmul_reduce_scatter"):
        ours = str(getattr(ops, name).default._schema).replace("tpgemm::", "")
        theirs = str(getattr(torch.ops.symm_mem, name).default._schema).replace("symm_mem::", "")
        assert ours == theirs


def test_opcheck(group_name):
    torch.manual_seed(0)
    A, B = torch.randn(8, 16), torch.randn(16, 24)
    torch.library.opcheck(ops.fused_all_gather_matmul, (A, [B, B[:, :8]], 0, group_name), {"return_A": True})
    torch.library.opcheck(ops.fused_all_gather_matmul, (A, [B], 0, group_name), {"return_A": False})
    torch.library.opcheck(ops.fused_matmul_reduce_scatter, (A, B, "sum", 0, group_name))
    torch.library.opcheck(ops.fused_matmul_reduce_scatter, (A, B, "avg", -1, group_name))
    torch.library.opcheck(ops.matmul_all_reduce, (A, B, "sum", group_name))
    torch.library.opcheck(ops.all_reduce, (A, "sum", group_name))


def test_values_on_one_rank_equal_the_matmul(group_name):
    A, B = torch.randn(6, 16), torch.randn(16, 8)
    g, (d,) = ops.fused_all_gather_matmul(A, [B], 0, group_name)
    torch.testing.assert_close(g, A)
    torch.testing.assert_close(d, A @ B)
    torch.testing.assert_close(ops.fused_matmul_reduce_scatter(A, B, "sum", 0, group_name), A @ B)
    torch.testing.assert_close(ops.matmul_all_reduce(A, B, "avg", group_name), A @ B)


def test_serve_async_tp_routes_torch_symm_mem_ops_and_gives_them_back(group_name):
    import torch.distributed._symmetric_memory  # noqa: F401  (defines torch.ops.symm_mem)
    A, B = torch.randn(6, 16), torch.randn(16, 8)
    with pytest.raises(NotImplementedError):  # torch's ops have CUDA kernels only
        torch.ops.symm_mem.fused_all_gather_matmul(A, [B], 0, group_name)
    records = {k for k in torch.library._impls if k.startswith("symm_mem/")}
    tpgemm.ops.serve_async_tp()
    tpgemm.ops.serve_async_tp()  # (a second call changes nothing)
    try:
        assert tpgemm.ops.serving_async_tp()
        calls = tpgemm.ops.async_tp_calls_served()
        G, (D,) = torch.ops.symm_mem.fused_all_gather_matmul(A, [B], 0, group_name)
        torch.testing.assert_close(G, A)
        torch.testing.assert_close(D, A @ B)
        torch.testing.assert_close(torch.ops.symm_mem.fused_matmul_reduce_scatter(A, B, "sum", 0, group_name), A @ B)
        if hasattr(torch, "float8_e4m3fn"):  # the FP8 pair too, as torch._scaled_mm takes it
            A8, B8 = _fp8(6, 32), _fp8(16, 32).t()
            sa, sb = torch.tensor(0.5), torch.tensor(1.25)
            want = torch._scaled_mm(A8, B8, sa, sb, out_dtype=torch.float32)
            _, (d8,) = torch.ops.symm_mem.fused_all_gather_scaled_matmul(A8, [B8], sa, [sb], 0, group_name, [None],
                                                                          [None], [torch.float32], [False])
            torch.testing.assert_close(d8, want)
            rs8 = torch.ops.symm_mem.fused_scaled_matmul_reduce_scatter(A8, B8, sa, sb, "sum", 0, 0, group_name, [6, 16],
                                                                        out_dtype=torch.float32)
            torch.testing.assert_close(rs8, want)
        assert tpgemm.ops.async_tp_calls_served() == calls  # (CPU tensors: tpgemm's torch path, not its kernels)
    finally:
        tpgemm.ops.serve_async_tp(False)
    assert not tpgemm.ops.serving_async_tp()
    with pytest.raises(NotImplementedError):
        torch.ops.symm_mem.fused_all_gather_matmul(A, [B], 0, group_name)
    # torch.library's records of torch's own kernels are as they were
    assert {k for k in torch.library._impls if k.startswith("symm_mem/")} == records


def test_the_kernels_modules_import_alone():
    import subprocess
    import sys
    for module in ("tpgemm._scaled_ops", "tpgemm._async_tp"):  # (each first in a fresh process)
        r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
        assert r.returncode == 0, f"import {module}: {r.stderr[-2000:]}"


def test_served_calls_tpgemm_declines_run_torchs_own_kernel():
    """NOTE [torch path hook]: under serve_async_tp, a GPU call tpgemm's kernel declines runs torch's
    kernel with the call's own arguments, and only calls tpgemm took are counted."""
    from tpgemm import _async_tp

    class OnGpu(torch.Tensor):  # a CPU tensor that says it is on the GPU
        @property
        def is_cuda(self):
            return True

    A = torch.zeros(2, 2).as_subclass(OnGpu)
    seen = []

    def tpgemm_kernel(A, n, *, flag=False, torch_path=None):
        return torch_path() if n < 0 else ("tpgemm", n, flag)

    def torch_kernel(A, n, *, flag=False):
        seen.append((n, flag))
        return ("torch", n, flag)

    fn = _async_tp._serving(tpgemm_kernel, torch_kernel)
    calls = tpgemm.ops.async_tp_calls_served()
    assert fn(A, 3, flag=True) == ("tpgemm", 3, True)
    assert tpgemm.ops.async_tp_calls_served() == calls + 1
    assert fn(A, -1, flag=True) == ("torch", -1, True) and seen == [(-1, True)]
    assert tpgemm.ops.async_tp_calls_served() == calls + 1


def _fp8(*shape):
    return (torch.randn(*shape) * 0.5).to(torch.float8_e4m3fn)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_scaled_ops_on_one_rank_equal_scaled_mm(group_name, out_dtype):
    A, W = _fp8(6, 32), _fp8(16, 32)
    B = W.t()  # [K, N], column-major as torch._scaled_mm takes it
    sa, sb = torch.tensor(0.5), torch.tensor(1.25)
    want = torch._scaled_mm(A, B, sa, sb, out_dtype=out_dtype)
    G, (d,) = ops.fused_all_gather_scaled_matmul(A, [B], sa, [sb], 0, group_name, [None], [None], [out_dtype], [False])
    assert G.dtype == A.dtype and torch.equal(G.view(torch.uint8), A.view(torch.uint8))
    torch.testing.assert_close(d, want)
    rs = ops.fused_scaled_matmul_reduce_scatter(A, B, sa, sb, "sum", 0, 0, group_name, [6, 16], out_dtype=out_dtype)
    torch.testing.assert_close(rs, want)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_scaled_all_gather_compiles_along_another_dim(group_name):
    A, B = _fp8(2, 3, 32), _fp8(16, 32).t()
    sa, sb = torch.tensor(0.5), torch.tensor(2.0)

    def f(a):
        return ops.fused_all_gather_scaled_matmul(a, [B], sa, [sb], 1, group_name, [None], [None], [torch.float32],
                                                  [False])
    G, (d,) = torch.compile(f, fullgraph=True, backend="aot_eager")(A)
    assert G.shape == A.shape and d.shape == (2, 3, 16)
    torch.testing.assert_close(d, torch._scaled_mm(A.flatten(0, 1), B, sa, sb, out_dtype=torch.float32).view(2, 3, 16))


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_scaled_ops_opcheck_and_bad_lists(group_name):
    A, B = _fp8(8, 32), _fp8(16, 32).t()
    sa, sb = torch.tensor(0.5), torch.tensor(2.0)
    # (test_schema compares the inputs with arithmetic CPU tensors of FP8 do not have)
    checks = ("test_faketensor", "test_autograd_registration")
    torch.library.opcheck(ops.fused_all_gather_scaled_matmul,
                          (A, [B], sa, [sb], 0, group_name, [None], [None], [torch.float32], [False]), test_utils=checks)
    torch.library.opcheck(ops.fused_scaled_matmul_reduce_scatter, (A, B, sa, sb, "sum", 0, 0, group_name, [8, 16]),
                          {"out_dtype": torch.float32}, test_utils=checks)
    with pytest.raises(tpgemm.InvalidArgument, match="out_dtypes has 0 entries"):
        ops.fused_all_gather_scaled_matmul(A, [B], sa, [sb], 0, group_name, [None], [None], [], [False])


@pytest.mark.parametrize("world", [2, 4])
def test_fake_shapes(group_name, monkeypatch, world):
    monkeypatch.setattr(T, "world_size", lambda g: world)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        A, B, C = torch.empty(2, 64, 32), torch.empty(32, 48), torch.empty(32, 16)
        g, (d, e) = ops.fused_all_gather_matmul(A, [B, C], 0, group_name)
        assert g.shape == (2 * world, 64, 32) and d.shape == (2 * world, 64, 48) and e.shape == (2 * world, 64, 16)
        g, (d,) = ops.fused_all_gather_matmul(A, [B], 1, group_name, return_A=False)
        assert g is None and d.shape == (2, 64 * world, 48)
        # Along dim 1 of [2, 64, 32] (batch first): views with the gathered dim moved back, the strides
        # tpgemm's kernels and torch's async-TP op return (NOTE [gather dim moved first]).
        g, (d,) = ops.fused_all_gather_matmul(A, [B], 1, group_name)
        assert g.shape == (2, 64 * world, 32) and g.stride() == (32, 2 * 32, 1)
        assert d.shape == (2, 64 * world, 48) and d.stride() == (48, 2 * 48, 1)
        A3 = torch.empty(2, 8 * world, 32)
        d = ops.fused_matmul_reduce_scatter(A3, B, "sum", 1, group_name)
        assert d.shape == (2, 8, 48) and d.is_contiguous()
        A2 = torch.empty(8 * world, 32)
        assert ops.fused_matmul_reduce_scatter(A2, B, "sum", 0, group_name).shape == (8, 48)
        assert ops.fused_matmul_reduce_scatter(A2, B, "sum", -1, group_name).shape == (8 * world, 48 // world)
        assert ops.matmul_all_reduce(A, B, "sum", group_name).shape == (2, 64, 48)
        assert ops.all_reduce(A, "sum", group_name).shape == A.shape


def test_compile_fullgraph_traces_every_op(group_name):
    def block(x, w1, w2):
        _, (h,) = ops.fused_all_gather_matmul(x, [w1.t()], 0, group_name, return_A=False)
        y = ops.fused_matmul_reduce_scatter(torch.relu(h), w2.t(), "sum", 0, group_name)
        return ops.all_reduce(ops.matmul_all_reduce(y, w1.t(), "sum", group_name), "sum", group_name)
    x, w1, w2 = torch.randn(8, 16), torch.randn(32, 16), torch.randn(16, 32)
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, w1, w2), block(x, w1, w2))


def test_bad_operands_name_the_argument(group_name):
    A = torch.randn(8, 16)
    with pytest.raises(tpgemm.InvalidArgument, match=r"Bs\[1\] .* expected a 2-D \[K, N\]"):
        ops.fused_all_gather_matmul(A, [torch.randn(16, 8), torch.randn(16, 8, dtype=torch.float64)], 0, group_name)
    with pytest.raises(tpgemm.InvalidArgument, match=r"B has shape \(12, 8\): expected \[K=16, N\]"):
        ops.fused_matmul_reduce_scatter(A, torch.randn(12, 8), "sum", 0, group_name)
    with pytest.raises(tpgemm.InvalidArgument, match="reduce_op='max'"):
        ops.matmul_all_reduce(A, torch.randn(16, 8), "max", group_name)


def test_a_0d_a_is_refused_and_an_empty_one_left_to_torch(group_name):
    """A plan's extents are at least 1: an empty operand takes torch's path (which returns empty
    outputs) instead of failing in the plan; a 0-d A is no matmul operand at all."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with pytest.raises(tpgemm.InvalidArgument, match="A is a 0-d tensor"):
        ops.fused_matmul_reduce_scatter(torch.tensor(1.0), torch.randn(16, 8), "sum", 0, group_name)
    with pytest.raises(tpgemm.InvalidArgument, match="A is a 0-d tensor"):
        ops.matmul_all_reduce(torch.tensor(1.0), torch.randn(16, 8), "sum", group_name)
    with FakeTensorMode():  # (CUDA tensors without a GPU: what tpgemm's kernel would be handed)
        B = torch.empty(16, 8, device="cuda", dtype=torch.bfloat16)
        for A in (torch.empty(0, 16, device="cuda", dtype=torch.bfloat16),
                  torch.empty(3, 0, 16, device="cuda", dtype=torch.bfloat16)):
            assert tpgemm.ops._why_not(A, [B], ["B"]) == "an empty operand"
        assert tpgemm.ops._why_not(torch.empty(4, 16, device="cuda", dtype=torch.bfloat16), [B], ["B"]) == ""
    g, (d,) = ops.fused_all_gather_matmul(torch.randn(0, 16), [torch.randn(16, 8)], 0, group_name)
    assert g.shape == (0, 16) and d.shape == (0, 8)


def test_scalar_type_numbers_map_to_their_dtypes():
    """A ScalarType[] argument (out_dtypes) reaches a Python kernel as c10::ScalarType numbers:
    each maps back to the dtype it was."""
    from tpgemm import _scaled_ops as S
    lib = torch.library.Library("tpgemm_probe", "FRAGMENT")
    lib.define("codes(ScalarType[] t) -> Tensor")
    seen = []
    lib.impl("codes", lambda t: (seen.append(list(t)), torch.zeros(1))[1], "CompositeExplicitAutograd")
    dtypes = sorted(set(S._SCALAR_TYPES.values()), key=str)
    torch.ops.tpgemm_probe.codes(dtypes)
    assert [S._dtype(x) for x in seen[0]] == dtypes


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_scaled_all_gather_checks_every_b_first(group_name, monkeypatch):
    """A bad B after the first raises naming it before any collective runs."""
    from tpgemm import _scaled_ops as S
    gathered = []
    monkeypatch.setattr(S, "_gather_rows", lambda *a: gathered.append(1))
    A, B = _fp8(8, 32), _fp8(16, 32).t()
    s = torch.tensor(1.0)
    with pytest.raises(tpgemm.InvalidArgument, match=r"Bs\[1\] is \(24, 16\)"):
        ops.fused_all_gather_scaled_matmul(A, [B, _fp8(16, 24).t()], s, [s, s], 0, group_name, [None, None],
                                           [None, None], [torch.float32, torch.float32], [False, False])
    with pytest.raises(tpgemm.InvalidArgument, match=r"B_scales\[1\] is list"):  # (the kernel, past the schema)
        S._ag_scaled_kernel(A, [B, B], s, [s, [1.0]], 0, group_name, [None, None],
                            [None, None], [torch.float32, torch.float32], [False, False])
    assert not gathered


def test_prepare_is_public_and_skips_layers_torch_serves(group_name):
    assert tpgemm.prepare is tpgemm.nn.prepare
    col = ColumnParallelLinear(16, 32, group=group_name, device="cpu", dtype=torch.float32)
    row = RowParallelLinear(32, 16, bias=True, group=group_name, device="cpu", dtype=torch.float32)
    tpgemm.prepare(torch.nn.Sequential(col, row), 64)  # fp32: torch's path, no plan to make
    col16 = ColumnParallelLinear(16, 32, group=group_name, device="cpu")
    tpgemm.prepare(col16, 64)  # bf16 on the CPU: torch's path too, and no team or GPU needed


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error of a machine without a usable GPU")
def test_a_team_without_a_gpu_is_a_clear_error(group_name):
    with pytest.raises(tpgemm.InvalidArgument, match="no CUDA device is usable"):
        tpgemm.team_for_group(group_name)


def test_dims_out_of_range_raise_on_every_path(group_name):
    """torch's ops raise for a dim outside the tensor; tpgemm's do too (on its kernels' path, on
    torch's and under torch.compile's fake tensors), instead of wrapping it around."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    A, B = torch.randn(8, 16), torch.randn(16, 8)
    for mode in (None, FakeTensorMode()):
        with mode or torch.no_grad():
            a, b = (torch.empty(8, 16), torch.empty(16, 8)) if mode else (A, B)
            with pytest.raises(tpgemm.InvalidArgument, match=r"gather_dim=2: expected a dim of a 2-D tensor"):
                ops.fused_all_gather_matmul(a, [b], 2, group_name)
            with pytest.raises(tpgemm.InvalidArgument, match=r"scatter_dim=-3: expected a dim of a 2-D tensor"):
                ops.fused_matmul_reduce_scatter(a, b, "sum", -3, group_name)
    if hasattr(torch, "float8_e4m3fn"):
        A8, B8, s = _fp8(6, 32), _fp8(16, 32).t(), torch.tensor(1.0)
        with pytest.raises(tpgemm.InvalidArgument, match=r"orig_scatter_dim=2: expected a dim of a 2-D tensor"):
            ops.fused_scaled_matmul_reduce_scatter(A8, B8, s, s, "sum", 2, 2, group_name, [6, 16],
                                                   out_dtype=torch.float32)


def test_a_gather_along_k_is_left_to_torch(group_name, monkeypatch):
    """torch's compiler gathers along A's last dim where the shard's K is large: B then has W times
    A's K rows. tpgemm leaves that call to torch's path instead of refusing B."""
    monkeypatch.setattr(T, "world_size", lambda g: 2)
    A, B = torch.randn(8, 16), torch.randn(32, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the reason noted: A is on the CPU)
        assert tpgemm.ops._ag_call(A, [B], 1, group_name, True) is tpgemm.ops.TORCH_PATH
    with pytest.raises(tpgemm.InvalidArgument, match=r"expected \[K=32, N\]"):
        tpgemm.ops._ag_call(A, [torch.randn(16, 8)], -1, group_name, True)


def test_calls_are_worked_out_once_per_layout(group_name):
    """NOTE [calls worked out once]: a call's checks and choice are kept under its operands'
    layout; new data of that layout reuses them, another layout is worked out anew, and a layout
    that fails the checks is never kept (every such call raises)."""
    tpgemm.ops.forget_calls()
    A, B = torch.randn(8, 16), torch.randn(16, 24)
    torch.testing.assert_close(ops.matmul_all_reduce(A, B, "sum", group_name), A @ B)
    kept = len(tpgemm.ops._calls)
    A2 = torch.randn(8, 16)
    torch.testing.assert_close(ops.matmul_all_reduce(A2, B, "sum", group_name), A2 @ B)
    assert len(tpgemm.ops._calls) == kept
    A3 = torch.randn(16, 8).t()  # the same shape, other strides
    torch.testing.assert_close(ops.matmul_all_reduce(A3, B, "sum", group_name), A3 @ B)
    assert len(tpgemm.ops._calls) == kept + 1
    for _ in range(2):
        with pytest.raises(tpgemm.InvalidArgument, match=r"B has shape \(12, 24\)"):
            ops.matmul_all_reduce(A, torch.randn(12, 24), "sum", group_name)
    assert len(tpgemm.ops._calls) == kept + 1
    # Under torch.use_deterministic_algorithms the same layout is worked out anew (its plans keep
    # their sums in a fixed order: NOTE [deterministic plans]), and found again after.
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        for _ in range(2):
            torch.testing.assert_close(ops.matmul_all_reduce(A, B, "sum", group_name), A @ B)
        assert len(tpgemm.ops._calls) == kept + 2
    finally:
        torch.use_deterministic_algorithms(before)
    T.set_impl("gemm_ar", "auto")  # forgets them: their plans were made for the impl before
    assert len(tpgemm.ops._calls) == 0


@pytest.mark.parametrize("sequence_parallel", [True, False])
def test_modules_match_nn_linear_forward_and_backward(group_name, sequence_parallel):
    torch.manual_seed(1)
    ref1, ref2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
    col = ColumnParallelLinear.from_linear(ref1, group=group_name, sequence_parallel=sequence_parallel)
    row = RowParallelLinear.from_linear(ref2, group=group_name, sequence_parallel=sequence_parallel)
    x = torch.randn(2, 8, 16)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y = row(torch.relu(col(x1)))
    yr = ref2(torch.relu(ref1(x2)))
    torch.testing.assert_close(y, yr)
    y.square().sum().backward()
    yr.square().sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad)
    for ours, theirs in ((col.weight, ref1.weight), (col.bias, ref1.bias), (row.weight, ref2.weight),
                         (row.bias, ref2.bias)):
        torch.testing.assert_close(ours.grad, theirs.grad)


@pytest.mark.parametrize("sequence_parallel", [True, False])
def test_compiled_modules_trace_the_registered_ops(group_name, sequence_parallel):
    """Eager module calls go to the kernels straight; under torch.compile(fullgraph=True) the
    modules trace torch.ops.tpgemm, forward and backward, with eager's values; under no_grad the
    op alone runs."""
    torch.manual_seed(2)
    col = ColumnParallelLinear(16, 32, group=group_name, sequence_parallel=sequence_parallel, device="cpu",
                               dtype=torch.float32)
    row = RowParallelLinear(32, 16, group=group_name, sequence_parallel=sequence_parallel, device="cpu",
                            dtype=torch.float32)
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd
        return aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g), bw_compiler=lambda g, _: make_boxed_func(g))(gm, inputs)

    def block(x):
        return row(torch.relu(col(x)))

    x = torch.randn(8, 16)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch._dynamo.reset()
    y1, y2 = torch.compile(block, fullgraph=True, backend=backend)(x1), block(x2)
    torch.testing.assert_close(y1, y2)
    assert any("tpgemm" in str(g.graph) or any("tpgemm" in str(m.graph) for m in g.modules() if hasattr(m, "graph"))
               for g in graphs)
    y1.square().sum().backward()
    g1 = (x1.grad.clone(), col.weight.grad.clone(), row.weight.grad.clone())
    col.weight.grad = row.weight.grad = None
    y2.square().sum().backward()
    for a, b in zip(g1, (x2.grad, col.weight.grad, row.weight.grad)):
        torch.testing.assert_close(a, b)
    with torch.no_grad():
        torch.testing.assert_close(block(x), y2.detach())


def test_modules_take_the_registered_ops_under_a_dispatch_mode(group_name, monkeypatch):
    """FakeTensorMode (and make_fx, any dispatch mode) sees torch.ops.tpgemm: the kernels called
    straight, which read device addresses, are for plain tensors in eager mode only."""
    import tpgemm.nn as tnn
    from torch._subclasses.fake_tensor import FakeTensorMode

    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was called straight under a dispatch mode")
    monkeypatch.setattr(tnn._Direct, "fused_matmul_reduce_scatter", staticmethod(refuse))
    monkeypatch.setattr(tnn._Direct, "fused_all_gather_matmul", staticmethod(refuse))
    col = ColumnParallelLinear(16, 32, group=group_name, device="cpu", dtype=torch.float32)
    row = RowParallelLinear(32, 16, group=group_name, device="cpu", dtype=torch.float32)
    with FakeTensorMode(allow_non_fake_inputs=True):
        y = row(torch.relu(col(torch.randn(8, 16))))
    assert tuple(y.shape) == (8, 16)
    with pytest.raises(AssertionError, match="called straight"):
        col(torch.randn(8, 16))  # eager, plain: the straight path


def test_module_sizes_must_split(group_name, monkeypatch):
    monkeypatch.setattr(T, "world_size", lambda g: 3)
    with pytest.raises(tpgemm.InvalidArgument, match="out_features=32: expected a multiple of the group's size 3"):
        ColumnParallelLinear(16, 32, group=group_name, device="cpu", dtype=torch.float32)


def test_prepare_leaves_refused_problems_to_torch(group_name, monkeypatch):
    """A problem tpgemm refuses (Unsupported, on every rank alike) makes no plan in prepare(), as
    forward would fall back to torch's path for it; other errors still raise."""
    asked = []

    def refuse(group, op, m, n, k, dtype, layout, **kw):
        asked.append(op)
        raise tpgemm.Unsupported("deterministic=true with impl=baseline: no fixed-order implementation here")

    monkeypatch.setattr(T, "plan", refuse)
    monkeypatch.setattr(tpgemm.nn._ParallelLinear, "_served_by_torch", lambda self: False)  # as on a GPU
    col = ColumnParallelLinear(16, 32, group=group_name, device="cpu", dtype=torch.bfloat16)
    row = RowParallelLinear(32, 16, group=group_name, device="cpu", dtype=torch.bfloat16, sequence_parallel=False)
    with pytest.warns(UserWarning, match="running torch's own path"):
        tpgemm.nn.prepare(torch.nn.Sequential(col, row), 64)
    assert asked == ["ag_gemm", "gemm_rs", "gemm_ar"]
    tpgemm.nn.prepare(torch.nn.Sequential(col, row), 64)  # the refusals are kept: no plan asked for again
    assert asked == ["ag_gemm", "gemm_rs", "gemm_ar"]

    def invalid(group, op, m, n, k, dtype, layout, **kw):
        raise tpgemm.InvalidArgument("M=64: expected something else")

    monkeypatch.setattr(T, "plan", invalid)
    with pytest.raises(tpgemm.InvalidArgument, match="M=64"):
        col.prepare(128)


def test_plans_per_shape_exact_then_shared_by_powers_of_two(monkeypatch):
    """A shape's first token counts get plans of their own; later ones share one plan per power
    of two of M (in units of W where M is sharded), each call passing its M and making its range."""
    made, prepared = [], []

    class FakePlan:
        impl = "auto"

        def __init__(self, team, op, m, n, k, **kw):
            self.m = m
            made.append((op, m))

        def prepare(self, m):
            prepared.append((self.m, m))

    class FakeTeam:
        world_size = 4

    class FakeEntry:
        team = FakeTeam()
        plans = {}

    monkeypatch.setattr(T, "_entry", lambda group: FakeEntry)
    monkeypatch.setattr(T._C, "Plan", FakePlan)
    calls = [T.plan("g", "gemm_rs", m, 1024, 512, "bf16", "nk") for m in (4096, 8, 12, 16, 20, 24, 4096, 36)]
    assert [c.m for c in calls] == [4096, 8, 12, 16, 20, 24, 4096, 36]
    # Exact plans for the first four M; then 20 -> 32 (units of W=4: 4, 8, 16, 32), 24 -> 32, 36 -> 64.
    assert made == [("gemm_rs", 4096), ("gemm_rs", 8), ("gemm_rs", 12), ("gemm_rs", 16), ("gemm_rs", 32),
                    ("gemm_rs", 64)]
    assert calls[6].plan is calls[0].plan  # the exact plan again
    assert calls[4].plan is calls[5].plan and calls[4].plan.m == 32
    assert prepared == [(32, 20), (32, 24), (64, 36)]
    # gemm_ar does not shard M: powers of two from 1.
    FakeEntry.plans = {}
    made.clear()
    for m in (100, 101, 102, 103, 3):
        T.plan("g", "gemm_ar", m, 1024, 512, "bf16", "nk")
    assert made[-1] == ("gemm_ar", 4)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_scales_tpgemm_reads_tensor_wise_and_row_wise():
    from tpgemm._scaled_ops import _aligned_scales, _scales_kind
    A, B = _fp8(2, 3, 32), _fp8(16, 32).t()
    one = torch.tensor(0.5)
    assert _scales_kind(A, B, one, torch.tensor([2.0])) == "tensor"
    assert _scales_kind(A, B, torch.ones(2, 3, 1), torch.ones(1, 16)) == "row"
    assert _scales_kind(A, B, torch.ones(6, 1), torch.ones(1, 16)) is None, "A's rows, shaped as A's leading dims"
    assert _scales_kind(A, B, torch.ones(2, 3, 1), torch.ones(16, 1)) is None, "B's scale is 1 x N"
    assert _scales_kind(A, B, one.double(), one) is None, "fp32 only"
    assert _scales_kind(A, B, torch.ones(2, 3, 4), torch.ones(1, 16)) is None, "A's rows x 1"
    # A view at an offset, or a strided one, is copied packed and 16-byte aligned; a tensor of its own is kept.
    base = torch.zeros(8)
    kept, moved, packed = _aligned_scales(base[:1], base[1:2], torch.ones(4, 2)[:, :1])
    assert kept.data_ptr() == base.data_ptr()
    assert moved.data_ptr() % 16 == 0 and moved.data_ptr() != base.data_ptr() + 4
    assert packed.is_contiguous() and packed.shape == (4, 1)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_scales_tpgemm_reads_block_wise():
    from tpgemm._scaled_ops import _aligned_block_scales, _scales_kind, _torch_block_mm_check
    rows, k, n = 6, 384, 256  # three blocks of K (B's scales padded to four), two of N
    A, B = _fp8(rows, k), _fp8(n, k).t()
    sa = torch.ones(3, rows).t()  # (rows, K/128), strides (1, rows): torch's BlockWise1x128
    sb = torch.ones(2, 4)[:, :3].t()  # (K/128, N/128), strides (1, 4): BlockWise128x128, rows of 4
    assert _scales_kind(A, B, sa, sb) == "block"
    assert _scales_kind(A, B, sa, torch.ones(2, 4).t()) == "block", "as torch's _scaled_mm_v2 shapes it: (L4, N/128)"
    assert _scales_kind(A, B, torch.ones(rows, 3), sb) is None, "A's scales K block by K block, not row by row"
    packed = torch.arange(6.0).view(2, 3).t()  # B's rows of scales 3 apart (packed, as torch 2.11 checks)
    assert _scales_kind(A, B, sa, packed) == "block"
    _, padded = _aligned_block_scales(sa, packed)  # tpgemm reads them 4 apart: copied so
    assert padded.shape == (3, 2) and padded.stride() == (1, 4) and torch.equal(padded, packed)
    assert _scales_kind(A, B, sa, torch.ones(2, 5)[:, :3].t()) is None, "B's rows of scales 5 apart"
    assert _scales_kind(A, B, sa, torch.ones(3, 2)) is None, "not row-major"
    assert _scales_kind(A.view(2, 3, k), B, sa, sb) is None, "a 2-D A"
    A4, B4 = _fp8(rows, 512), _fp8(n, 512).t()  # four blocks of K: no padding
    assert _scales_kind(A4, B4, torch.ones(4, rows).t(), torch.ones(2, 4).t()) == "block"
    # A view at an offset is copied 16-byte aligned with its strides (the layout) kept.
    off = torch.arange(12.0)[1:9].view(2, 4)[:, :3].t()
    kept, moved = _aligned_block_scales(sb, off)
    assert kept.data_ptr() == sb.data_ptr()
    assert moved.data_ptr() % 16 == 0 and moved.stride() == (1, 4) and torch.equal(moved, off)
    # torch._scaled_mm's block-wise sums are right only where K/128 is a multiple of 4: elsewhere
    # whatever would run there is refused, naming what would do.
    _torch_block_mm_check(1024, "here")
    with pytest.raises(tpgemm.Unsupported, match="K=384 .* multiple of 512"):
        _torch_block_mm_check(384, "here")


def test_a_rows_read_in_place_where_equally_spaced():
    from tpgemm.ops import _lda, _row_stride
    A = torch.zeros(6, 40, dtype=torch.bfloat16)
    assert _row_stride(A) == 40 and _lda(A) == (0, False), "contiguous: packed"
    assert _row_stride(torch.zeros(6, 64, dtype=torch.bfloat16)[:, :40]) == 64, "a slice of a wider tensor"
    q = torch.zeros(2, 3, 3 * 32, dtype=torch.bfloat16).split(32, dim=-1)[1]  # a fused projection, split
    assert _row_stride(q) == 96 and _lda(q) == (96, False)
    assert _row_stride(torch.zeros(2, 4, 72, dtype=torch.bfloat16)[:, :3, :64]) is None, "leading dims that do not collapse"
    assert _row_stride(torch.zeros(6, 44, dtype=torch.bfloat16)[:, :40]) is None, "rows 88 bytes apart: not 16"
    assert _lda(torch.zeros(40, 6, dtype=torch.bfloat16).t()) == (0, True), "A transposed: copied into rows"
    assert _row_stride(torch.zeros(1, 1, 64, dtype=torch.bfloat16)[:, :, :40]) == 40, "one row"


def test_strided_a_falls_back_to_rows_and_is_realigned(group_name, monkeypatch):
    """An implementation that refuses a row stride gets A copied into rows (no warning: tpgemm
    still runs); rows at a stride from an unaligned address are copied aligned, at that stride,
    and so is a B at such an address."""
    from tpgemm.ops import _Call, _operands, _plan_reading_a, _unsupported_plans
    asked = []

    def packed_only(group, op, m, n, k, dtype, layout, **kw):
        asked.append(kw.get("lda", 0))
        if kw.get("lda", 0):
            raise tpgemm.Unsupported("impl fused takes A and B packed")
        return "plan"

    monkeypatch.setattr(T, "plan", packed_only)
    _unsupported_plans.clear()
    A = torch.zeros(6, 64, dtype=torch.bfloat16)[:, :40]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _plan_reading_a(A, group_name, "gemm_ar", 6, 16, 40, "bf16", "nk") == ("plan", True, 0)
    assert asked == [64, 0]
    base = torch.arange(6 * 72, dtype=torch.float32).to(torch.bfloat16).view(6, 72)
    A = base[:, 4:68]  # 8 bytes in: rows 144 bytes apart
    assert A.data_ptr() % 16 == 8
    Bt = torch.randn(8 * 64 + 4, dtype=torch.bfloat16)[4:].view(8, 64).t()  # W.t(), 8 bytes in
    assert Bt.data_ptr() % 16 == 8
    A2, B2 = _operands(_Call("plan", a_ld=72), A, Bt)
    assert A2.data_ptr() % 16 == 0 and A2.stride() == (72, 1) and torch.equal(A2, A)
    assert B2.data_ptr() % 16 == 0 and B2.stride() == Bt.stride() and torch.equal(B2, Bt)


def test_set_impl_is_public_and_checks_its_op():
    from tpgemm import _torch as T
    assert tpgemm.set_impl is T.set_impl
    with pytest.raises(tpgemm.InvalidArgument, match="op='matmul'"):
        tpgemm.set_impl("matmul", "baseline")
    with pytest.raises(tpgemm.InvalidArgument, match="impl='no_such_impl'.*pipelined_ce"):
        tpgemm.set_impl("ag_gemm", "no_such_impl")  # at once, not at the next plan
    with pytest.raises(tpgemm.InvalidArgument, match="impl='pipelined_ce'.*oneshot"):
        tpgemm.set_impl("all_reduce", "pipelined_ce")
    assert T.impl_for("ag_gemm") == "auto"  # a refused name changes nothing
    tpgemm.set_impl("gemm_rs", "baseline")
    try:
        assert T.impl_for("gemm_rs") == "baseline"
    finally:
        tpgemm.set_impl("gemm_rs", "auto")
    assert T.impl_for("gemm_rs") == "auto"


def test_one_plans_calls_from_another_stream_wait_for_its_last(monkeypatch):
    """NOTE [one plan, several streams]: a call of a plan on another stream than its last waits for
    that stream first (an event), only on a switch; nothing is recorded or waited for where either
    stream captures."""
    log, capturing = [], set()

    class Event:
        def record(self, stream):
            log.append(("record", stream.handle))

    class Stream:
        def __init__(self, handle, device=None):
            self.handle = handle

        def wait_event(self, ev):
            log.append(("wait", self.handle))

    current = {"s": 1}
    monkeypatch.setattr(T, "stream", lambda device=None: current["s"])
    monkeypatch.setattr(T._C, "stream_capturing", lambda s: s in capturing)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "ExternalStream", Stream)
    plan, other = object(), object()

    def call(p, s):
        current["s"] = s
        assert T.call_stream(p, 0) == s

    call(plan, 1)
    call(plan, 1)
    assert log == []  # the first call, then the same stream: nothing to order
    call(plan, 2)
    assert log == [("record", 1), ("wait", 2)]  # a switch: stream 2 waits for what stream 1 holds
    call(other, 1)
    assert log == [("record", 1), ("wait", 2)]  # another plan: its own last stream
    capturing.add(3)
    call(plan, 3)  # captured: neither recorded nor kept as the last
    call(plan, 2)
    assert log == [("record", 1), ("wait", 2)]
    capturing.add(2)
    call(plan, 4)  # the last stream (2) captures: not waited for, and 4 becomes the last
    call(plan, 4)
    assert log == [("record", 1), ("wait", 2)]


class _EmulatedPlan:
    """A plan whose run() does the op on CPU tensors at W=2, for a rank 0 whose peer's rows are its
    own plus one: what tpgemm's kernels compute, to check the op layer's layouts around them."""

    def __init__(self, op, n, k, kw, tensors):
        self.op, self.n, self.k, self.kw, self.tensors = op, n, k, kw, tensors

    def run(self, a, b, c, d, a_gathered, stream):
        t = self.tensors
        rows = t[a].reshape(-1, self.k)
        both = torch.cat([rows, rows + 1])  # rank 0's rows, then rank 1's
        if self.op == "ag_gemm":
            t[d].view(-1, self.n).copy_(both @ t[b])
            if a_gathered:
                t[a_gathered].view(-1, self.k).copy_(both)
        else:
            p = rows @ t[b] + (rows + 1) @ t[b]
            t[d].copy_((p[: len(p) // 2] if self.kw.get("shard_dim") == "m" else p[:, : self.n // 2]).view(t[d].shape))


def test_a_dim_moved_first_around_the_kernels(group_name, monkeypatch):
    """NOTE [gather dim moved first], on tpgemm's path with the kernels emulated on the CPU (W=2,
    rank 0): a gather or scatter along the sequence of batch-first activations gives what gathering
    along that dim gives, the AllGather's outputs with the strides torch's async-TP op returns;
    rows along dim 0 (or after 1s) keep their packed outputs."""
    tensors = {}

    def address(t, name):
        tensors[id(t)] = t
        return id(t)

    monkeypatch.setattr(T, "world_size", lambda g: 2)
    monkeypatch.setattr(T, "plan", lambda group, op, m, n, k, dtype, layout, **kw: _EmulatedPlan(op, n, k, kw, tensors))
    monkeypatch.setattr(T, "check_tensor", lambda *args, **kw: None)
    monkeypatch.setattr(T, "team_device", lambda group: None)
    monkeypatch.setattr(T, "address", address)
    monkeypatch.setattr(T, "call_stream", lambda plan, device: 0)
    monkeypatch.setattr(tpgemm.ops, "_why_not", lambda *args, **kw: "")
    tpgemm.ops.forget_calls()
    try:
        bf16 = dict(dtype=torch.bfloat16)
        B = torch.randint(-2, 3, (16, 12)).to(**bf16)
        for shape, dim, moved in (((3, 4, 16), 1, True), ((2, 3, 4, 16), 2, True), ((4, 3, 16), 0, False),
                                  ((1, 4, 16), 1, False)):
            A = torch.randint(-2, 3, shape).to(**bf16)
            full = torch.cat([A, A + 1], dim)
            G, (D,) = tpgemm.ops._ag_kernel(A, [B], dim, group_name)
            assert tpgemm.ops._calls and all(c.plan is not None for c in tpgemm.ops._calls.values())
            torch.testing.assert_close(G, full)
            torch.testing.assert_close(D, full @ B)
            if moved:  # views of [.., S, ..] rows moved back: torch's async-TP strides
                assert D.stride() == full.movedim(dim, 0).contiguous().matmul(B).movedim(0, dim).stride()
                assert G.stride() == full.movedim(dim, 0).contiguous().movedim(0, dim).stride()
            else:
                assert D.is_contiguous() and G.is_contiguous()
            A2 = torch.randint(-2, 3, shape[:dim] + (shape[dim] * 2,) + shape[dim + 1:]).to(**bf16)
            D2 = tpgemm.ops._rs_kernel(A2, B, "sum", dim, group_name)
            torch.testing.assert_close(D2, (A2 @ B + (A2 + 1) @ B).chunk(2, dim)[0])
            assert D2.is_contiguous()
            if moved:  # the AllGather's output read in place as the ReduceScatter's A (no copy into rows)
                c = tpgemm.ops._rs_call(D, B[:12], "sum", dim, group_name)
                assert c.moved == dim and not c.a_rows and c.a_ld == 0
        with pytest.raises(tpgemm.InvalidArgument, match=r"scatter dim 1 \(5\) must be divisible by the group's size 2"):
            tpgemm.ops._rs_kernel(torch.zeros(3, 5, 16, **bf16), B, "sum", 1, group_name)
    finally:
        tpgemm.ops.forget_calls()
