"""Runs dist_check.py (the torch layer on GPUs) under torchrun at W=1, 2 and 4, each where there
are enough GPUs (one GPU runs a team of one: every op and module end to end, nothing exchanged);
skipped without GPUs, saying so."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.parametrize("world", [1, 2, 4])
def test_torch_layer_on_gpus(world):
    if GPUS < world:
        pytest.skip(f"needs {world} GPUs, {GPUS} visible")
    script = os.path.join(os.path.dirname(__file__), "dist_check.py")
    # The checks' ranks run in step: a peer lost on the GPU is found in seconds, well inside this
    # test's own limit, not after the default device bound (the host's).
    env = dict(os.environ)
    env.setdefault("TPGEMM_TIMEOUT_MS", "5000")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
                        script], capture_output=True, text=True, timeout=900, env=env)
    print(r.stdout[-20000:])
    print(r.stderr[-20000:], file=sys.stderr)
    assert r.returncode == 0, f"dist_check at W={world} failed (rc {r.returncode})"
