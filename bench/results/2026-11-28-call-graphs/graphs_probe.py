import os, sys, time
for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(k, v)
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "python"))
import torch, torch.distributed as dist
import dist_check as dc
from tpgemm import _torch as T
local = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
W, r, g = dist.get_world_size(), dist.get_rank(), dist.group.WORLD.group_name
torch.manual_seed(100 + r)
seen = set()
def plans(tag):
    for e in T._teams.values():
        for k, p in e.plans.items():
            if id(p) in seen or not hasattr(p, "impl"):
                continue
            seen.add(id(p))
            print(f"[r{r}] {tag}: plan {getattr(p, 'description', k)} impl={p.impl}", flush=True)
steps = [("ops", lambda: dc.check_ops(g, W, r)), ("fp32", lambda: dc.check_fp32_output(g, W, r)),
         ("torch", lambda: dc.check_against_torch(g, W)), ("modules", lambda: dc.check_modules(W, r)),
         ("compile", lambda: dc.check_compile_and_graphs(W, r)), ("bad", lambda: dc.check_bad_input(g, W, r)),
         ("det", lambda: dc.check_deterministic(g, W, r))]
only = os.environ.get("STEPS")
for name, fn in steps:
    if only and name not in only.split(","):
        continue
    t0 = time.time()
    nf = len(dc.failures)
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as e:
        import traceback; traceback.print_exc()
        dc.check(False, f"{name} exception {type(e).__name__}: {str(e)[:300]}")
    print(f"[r{r}] step {name}: {len(dc.failures) - nf} failures, {time.time() - t0:.1f}s", flush=True)
    plans(name)
    if len(dc.failures) > nf:
        break
bad = torch.tensor([len(dc.failures)], device="cuda"); dist.all_reduce(bad)
dc.log(f"graphs_probe W={W} CALL_GRAPHS={os.environ.get('TPGEMM_CALL_GRAPHS')} TUNE={os.environ.get('TPGEMM_TUNE')}: {'PASS' if bad.item() == 0 else 'FAIL'}")
dist.destroy_process_group()
