"""torch's async-TP on tpgemm: torch.ops.symm_mem's fused ops served by tpgemm's kernels.

torch's compiler (torch._inductor.config._micro_pipeline_tp = True, which torchtitan's async
tensor parallelism sets) rewrites all_gather -> matmul and matmul -> reduce_scatter into
torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter (and their FP8 forms).
tpgemm's ops have exactly those schemas and results, so their kernels can take the symm_mem ops'
place in the dispatcher: the compiled model then runs tpgemm without a change to its code.
"""
import torch

from ._errors import Unsupported


def _kernels():
    """op name -> (tpgemm's kernel, the same function torch.ops.tpgemm.<name> runs; torch's own CUDA
    kernel's name in torch.distributed._symmetric_memory). Looked up when asked: ops.py imports this
    module while its kernels' modules load."""
    from . import _scaled_ops, ops
    return {
        "fused_all_gather_matmul": (ops._ag_kernel, "_fused_all_gather_matmul"),
        "fused_matmul_reduce_scatter": (ops._rs_kernel, "_fused_matmul_reduce_scatter"),
        "fused_all_gather_scaled_matmul": (_scaled_ops._ag_scaled_kernel, "_fused_all_gather_scaled_matmul"),
        "fused_scaled_matmul_reduce_scatter": (_scaled_ops._rs_scaled_kernel, "_fused_scaled_matmul_reduce_scatter"),
    }


_served = None  # the Library holding the registrations while they are in force
_torch_records = set()  # torch.library's records of symm_mem kernels before serving (_undo)
_calls = 0      # calls of torch's ops that tpgemm's GPU kernels took


def _serving(kernel, torch_kernel):
    """tpgemm's kernel in torch's op's place: a CUDA call tpgemm does not serve (a shape it refuses,
    a gather along another dim) runs torch's own kernel, as it would have without tpgemm (NOTE
    [torch path hook]); CPU tensors take tpgemm's torch path (torch has no CPU kernel)."""
    def served(*args, **kwargs):
        global _calls
        on_gpu = isinstance(args[0], torch.Tensor) and args[0].is_cuda
        declined = []

        def torch_path():
            declined.append(True)
            return torch_kernel(*args, **kwargs)

        out = kernel(*args, **kwargs, torch_path=torch_path if on_gpu and torch_kernel is not None else None)
        if on_gpu and not declined:
            _calls += 1
        return out
    return served


def serve_async_tp(enable=True):
    """From now on (enable=True) torch.ops.symm_mem's fused AllGather+GEMM and GEMM+ReduceScatter
    ops, bf16/fp16 and FP8, run tpgemm's kernels on CUDA in this process (a call tpgemm does not
    serve runs torch's own kernel; CPU tensors tpgemm's torch path); enable=False gives them back
    to torch's own kernels. Every rank must do the same. torch logs once that a registered kernel
    was overridden. torch's micro-pipeline pass puts the ops in only for groups with its symmetric
    memory enabled (torch.distributed._symmetric_memory.enable_symm_mem_for_group, which
    torchtitan calls)."""
    global _served
    if enable and _served is None:
        import torch.distributed._symmetric_memory as symm  # (defines the symm_mem ops first)
        kernels = _kernels()
        missing = [t for _, t in kernels.values() if not callable(getattr(symm, t, None))]
        if missing:  # (a call tpgemm declines must have torch's kernel to run)
            raise Unsupported(f"serve_async_tp: this torch {torch.__version__} has no {', '.join(missing)} in "
                              "torch.distributed._symmetric_memory (tpgemm knows torch 2.11's)")
        global _torch_records
        _torch_records = {k for k in torch.library._impls if k.startswith("symm_mem/")}
        lib = torch.library.Library("symm_mem", "IMPL")
        try:
            for name, (kernel, torch_name) in kernels.items():
                fn = _serving(kernel, getattr(symm, torch_name))
                lib.impl(name, fn, "CUDA", allow_override=True)  # over torch's own, registered from Python
                lib.impl(name, fn, "CPU", allow_override=True)  # (torch has none: tpgemm's torch path)
        except BaseException:
            _undo(lib)
            raise
        _served = lib
    elif not enable and _served is not None:
        _undo(_served)
        _served = None


def _undo(lib):
    """Takes lib's registrations away (Library._destroy, which torch's own scoped libraries use):
    the kernels registered before them, torch's, are the ones in force again. _destroy also drops
    torch.library's record of torch's own CUDA kernels (which guards them against being overridden
    unawares): the records there were before serving are put back."""
    lib._destroy()
    lib._op_impls.clear()  # (the Library's finalizer would drop those records again)
    torch.library._impls.update(_torch_records)


def serving_async_tp():
    """Whether serve_async_tp() is in force."""
    return _served is not None


def async_tp_calls_served():
    """How many calls of torch.ops.symm_mem's fused ops tpgemm's GPU kernels have taken in this
    process (under serve_async_tp; not those it left to torch, nor CPU tensors'): whether a compiled
    model's async-TP really runs on tpgemm."""
    return _calls
