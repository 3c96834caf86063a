"""torch's async-TP on tpgemm: torch.ops.symm_mem's fused ops served by tpgemm's kernels.

torch's compiler (torch._inductor.config._micro_pipeline_tp = True, which torchtitan's async
tensor parallelism sets) rewrites all_gather -> matmul and matmul -> reduce_scatter into
torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter (and their FP8 forms).
tpgemm's ops have exactly those schemas and results, so their kernels can take the symm_mem ops'
place in the dispatcher: the compiled model then runs tpgemm without a change to its code.
"""
import torch

from . import _scaled_ops
from . import ops

# op name -> tpgemm's kernel (the same function torch.ops.tpgemm.<name> runs)
_KERNELS = {
    "fused_all_gather_matmul": ops._ag_kernel,
    "fused_matmul_reduce_scatter": ops._rs_kernel,
    "fused_all_gather_scaled_matmul": _scaled_ops._ag_scaled_kernel,
    "fused_scaled_matmul_reduce_scatter": _scaled_ops._rs_scaled_kernel,
}
_served = None  # the Library holding the registrations while they are in force
_calls = 0      # calls of torch's ops that tpgemm's kernels took


def _counted(kernel):
    def served(*args, **kwargs):
        global _calls
        _calls += 1
        return kernel(*args, **kwargs)
    return served


def serve_async_tp(enable=True):
    """From now on (enable=True) torch.ops.symm_mem's fused AllGather+GEMM and GEMM+ReduceScatter
    ops, bf16/fp16 and FP8, run tpgemm's kernels on CUDA (and its torch path on CPU tensors) in
    this process; enable=False gives them back to torch's own kernels. Every rank must do the
    same. torch logs once that a registered kernel was overridden. torch's micro-pipeline pass puts
    the ops in only for groups with its symmetric memory enabled
    (torch.distributed._symmetric_memory.enable_symm_mem_for_group, which torchtitan calls)."""
    global _served
    if enable and _served is None:
        import torch.distributed._symmetric_memory  # noqa: F401  (defines the symm_mem ops first)
        lib = torch.library.Library("symm_mem", "IMPL")
        try:
            for name, kernel in _KERNELS.items():
                lib.impl(name, _counted(kernel), "CUDA", allow_override=True)  # over torch's, registered from Python
                lib.impl(name, _counted(kernel), "CPU", allow_override=True)  # (torch has none: tpgemm's torch path)
        except BaseException:
            lib._destroy()
            raise
        _served = lib
    elif not enable and _served is not None:
        # The registrations go (Library._destroy, which torch's own scoped libraries use); the
        # kernels registered before them, torch's, are the ones in force again.
        _served._destroy()
        _served = None


def serving_async_tp():
    """Whether serve_async_tp() is in force."""
    return _served is not None


def async_tp_calls_served():
    """How many calls of torch.ops.symm_mem's fused ops tpgemm's kernels have taken in this process
    (under serve_async_tp): whether a compiled model's async-TP really runs on tpgemm."""
    return _calls
