# Host time of cudaGraphLaunch: one graph launched over and over, against L graphs in rotation,
# the GPU held busy. Each graph: `nodes` small kernels on the main stream and copies on a side
# stream joined by events (a pipelined call's shape).
import sys, time, statistics, torch
torch.cuda.set_device(0)
x = torch.zeros(1 << 16, device="cuda"); 
def make(nodes, side):
    bufs = [torch.zeros(1 << 16, device="cuda") for _ in range(2)]
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.graph(g):
        main = torch.cuda.current_stream()
        for i in range(nodes):
            bufs[0].add_(1.0)
            if side and i % 4 == 0:
                s.wait_stream(main)
                with torch.cuda.stream(s):
                    bufs[1].copy_(bufs[0])
                main.wait_stream(s)
    return g, bufs
for nodes, side in ((4, False), (24, True)):
    graphs = [make(nodes, side) for _ in range(256)]
    for L in (1, 2, 8, 64, 256):
        gs = [g for g, _ in graphs[:L]]
        for g in gs: g.replay()
        torch.cuda.synchronize()
        out = []
        for _ in range(5):
            torch.cuda._sleep(400_000_000)
            t0 = time.perf_counter()
            for i in range(200): gs[i % L].replay()
            out.append((time.perf_counter() - t0) / 200 * 1e6)
            torch.cuda.synchronize()
        print(f"nodes={nodes} side={side} graphs={L}: {statistics.median(out):.1f} us per launch", flush=True)
