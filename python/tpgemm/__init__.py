"""tpgemm: tensor-parallel GEMMs over NVLink with the communication hidden under the compute.

    import tpgemm                      # C++ core: Team, Plan, AllReducePlan, errors
    import tpgemm.ops                  # torch.ops.tpgemm.* (drop-in for torch.ops.symm_mem's fused ops)
    from tpgemm.nn import ColumnParallelLinear, RowParallelLinear

See the README ("Python and PyTorch") for the op table and what falls back to torch.
"""
import importlib.util as _util

# torch first, where it is installed: the process then loads torch's libnccl, and tpgemm uses the
# same one (one libnccl per process; tpgemm accepts any patch release of the NCCL minor it was
# built against and says so otherwise, when a team is made).
if _util.find_spec("torch") is not None:
    import torch as _torch_first  # noqa: F401

from . import _C
from ._errors import (CudaError, Error, InternalError, InvalidArgument, NcclError, PeerFailure, Timeout,
                      Unsupported)
from ._errors import install as _install_errors

_install_errors(_C)

Team = _C.Team
Plan = _C.Plan
AllReducePlan = _C.AllReducePlan
unique_id = _C.unique_id
nccl_version = _C.nccl_version

__version__ = "0.1.0"

__all__ = ["Team", "Plan", "AllReducePlan", "unique_id", "nccl_version", "Error", "InvalidArgument", "Unsupported",
           "CudaError", "NcclError", "Timeout", "PeerFailure", "InternalError", "team_for_group", "team_from_env",
           "prepare", "set_impl"]


def __getattr__(name):
    # The torch layer loads on first use, so that `import tpgemm` works without torch.
    if name in ("team_for_group", "team_from_env", "set_impl"):
        from . import _torch
        return getattr(_torch, name)
    if name == "prepare":  # (tpgemm.nn.prepare: the plans of a model's layers, before capture)
        from . import nn
        return nn.prepare
    if name in ("ops", "nn"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tpgemm' has no attribute {name!r}")
