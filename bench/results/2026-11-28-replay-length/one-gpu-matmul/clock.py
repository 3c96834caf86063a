# Per-call time of one matmul in CUDA-graph replays of 4, 20, 60, 200 calls, in alternation,
# with SM clock and power sampled beside (nvidia-smi, 20 ms). One GPU.
import subprocess, sys, time, json, os, statistics
import torch
out = os.environ.get("OUT", "/tmp")
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active",
                        "--format=csv,noheader", "-lms", "20", "-i", "0"], stdout=open(f"{out}/clock_smi.csv", "w"))
res = {}
for (m, n, k) in [(8192, 8192, 8192), (4096, 8192, 2048), (9354, 1232, 15224 // 2)]:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    graphs = {}
    s = torch.cuda.Stream()
    for L in (4, 20, 60, 200):
        torch.mm(a, b, out=c); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for _ in range(L):
                torch.mm(a, b, out=c)
        graphs[L] = g
    times = {L: [] for L in graphs}
    for rnd in range(7):
        for L, g in (sorted(graphs.items()) if rnd % 2 == 0 else sorted(graphs.items(), reverse=True)):
            time.sleep(0.05)  # idle between samples, as the tuner's start line and host waits leave
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); g.replay(); e1.record(); e1.synchronize()
            times[L].append(e0.elapsed_time(e1) / L)
    res[f"{m}x{n}x{k}"] = {L: statistics.median(v) for L, v in times.items()}
    print(f"{m}x{n}x{k}", " ".join(f"L={L}: {statistics.median(v)*1000:.1f} us" for L, v in times.items()), flush=True)
smi.terminate()
json.dump(res, open(f"{out}/clock.json", "w"), indent=1)
