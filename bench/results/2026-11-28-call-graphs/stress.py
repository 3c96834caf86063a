import os, sys
for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(k, v)
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "python"))
import torch, torch.distributed as dist
import dist_check as dc
local = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
W, r, g = dist.get_world_size(), dist.get_rank(), dist.group.WORLD.group_name
torch.manual_seed(100 + r)
for rep in range(int(os.environ.get("REPS", "6"))):
    try:
        dc.check_modules(W, r)
        dc.check_compile_and_graphs(W, r)
    except Exception as e:
        dc.check(False, f"exception {type(e).__name__}: {str(e)[:200]}")
        break
    dc.log(f"rep {rep}: {len(dc.failures)} failures")
from tpgemm import _torch as T
e = T._entry(g)
for k, p in e.plans.items():
    if isinstance(k[-1], int):
        dc.log(f"plan {k[:5]} M={k[-1]} {p.impl}")
bad = torch.tensor([len(dc.failures)], device="cuda"); dist.all_reduce(bad)
dc.log(f"stress W={W}: {'PASS' if bad.item() == 0 else 'FAIL'}")
