"""The C++ core as Python sees it, without a GPU: errors and argument checks."""
import pytest

import tpgemm


def test_errors_are_builtin_exceptions_too():
    assert issubclass(tpgemm.InvalidArgument, ValueError) and issubclass(tpgemm.InvalidArgument, tpgemm.Error)
    assert issubclass(tpgemm.Timeout, TimeoutError) and issubclass(tpgemm.Timeout, tpgemm.Error)
    assert issubclass(tpgemm.Unsupported, NotImplementedError)
    assert issubclass(tpgemm.PeerFailure, RuntimeError)


def test_a_unique_id_of_the_wrong_size_names_the_argument():
    with pytest.raises(tpgemm.InvalidArgument, match="unique_id: expected 128 bytes") as e:
        tpgemm.Team.from_unique_id(b"x" * 5, 0, 1, 0)
    assert e.value.code == "InvalidArgument"


def test_bad_team_arguments_are_invalid_argument():
    with pytest.raises(tpgemm.InvalidArgument, match="call_check='sometimes'"):
        tpgemm.Team.from_unique_id(b"\0" * 128, 0, 1, 0, call_check="sometimes")
    with pytest.raises(tpgemm.InvalidArgument, match="rank 3 of world size 2"):
        tpgemm.Team.from_unique_id(b"\0" * 128, 3, 2, 0)


def test_no_gpu_is_a_clear_error():
    import shutil
    import subprocess
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        pytest.skip("a GPU is present: the CPU-only error cannot be seen here")
    with pytest.raises(tpgemm.InvalidArgument, match="no CUDA device is usable"):
        tpgemm.Team.from_unique_id(b"\0" * 128, 0, 1, 0)


def test_nccl_versions():
    assert tpgemm._C.NCCL_BUILD_VERSION >= 22800
    # The process's libnccl (torch's, once torch is imported) must be the minor tpgemm was built
    # against; scripts/setup.sh installs the torch whose NCCL that is.
    loaded, built = tpgemm.nccl_version(), tpgemm._C.NCCL_BUILD_VERSION
    assert loaded // 100 == built // 100, (f"libnccl in this process is {loaded}, tpgemm was built with {built}: "
                                            "a torch bundling another NCCL minor (scripts/setup.sh pins torch)")
