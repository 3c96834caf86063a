import os

# NVLink multicast stays off in every test process and the ranks they start.
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)


def pytest_configure(config):
    # CPU tensors go to torch's own path by design here; the warning that says so is asserted
    # where it is the subject (pytest.warns), and noise elsewhere.
    config.addinivalue_line("filterwarnings", r"ignore:tpgemm\.\w+. (A|input) is on cpu. running torch's own path:UserWarning")
    # serve_async_tp overrides torch.ops.symm_mem's kernels on purpose; torch says so once.
    config.addinivalue_line("filterwarnings", r"ignore:Warning only once for all operators:UserWarning")
