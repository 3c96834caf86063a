#!/usr/bin/env python3
"""Side-by-side table of tpgemm-bench and bench/torch_peers.py results of one device call.

  bench/compare.py BENCH.json PEERS.json [PEERS_AR.json] [--cutlass CUTLASS.json]   -> markdown on stdout

CUTLASS.json: tpgemm-cutlass-distgemm's rows (CUTLASS's Distributed GEMM, same call), ag_gemm only.
With an e4m3 BENCH.json, PEERS.json is torch_peers.py --fp8's (ag and rs; its tpgemm-op rows, the
torch ops, are set against torch-symm's in a line of their own).

Columns: the peers' NCCL+cuBLAS and torch-symm, tpgemm's baseline (and its ratio to the peers'
NCCL+cuBLAS: a fair baseline is within 5%), what `auto` ran, its time, its speedup over tpgemm's
baseline and over torch-symm. Geomeans per op close the table."""
import json, math, sys

OPS = {"ag_gemm": "ag", "gemm_rs": "rs", "gemm_ar": "ar"}


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def of_ideal(v):
    """auto's geomean speedup over `ideal`'s (baseline / max(matmul alone, collective alone)) for
    one op's (speedup, ..., ideal) tuples; None where a row has no ideal."""
    return geomean([x[0] for x in v]) / geomean([x[3] for x in v]) if all(x[3] for x in v) else None


def main():
    args = sys.argv[1:]
    cutlass = {}
    if "--cutlass" in args:
        i = args.index("--cutlass")
        cutlass = {(r["M"], r["N"], r["K"]): r for r in json.load(open(args[i + 1]))}
        del args[i:i + 2]
    sys.argv[1:] = args
    bench = json.load(open(sys.argv[1]))
    peers = json.load(open(sys.argv[2]))
    rows = bench["rows"]
    W = rows[0]["W"]
    peer = {(r["op"], r["M"], r["N"], r["K"], r["impl"]): r["ms"] for r in peers}
    print(f"{bench['device']}, {bench['date']}; `{bench['command']}`\n")
    print("| op | M | N | K | NCCL+cuBLAS (torch) ms | tpgemm baseline ms | ratio | auto ran | auto ms | vs baseline | torch-symm ms | vs torch-symm | check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    per_op = {}
    for r in rows:
        if r["op"] not in OPS or r["impl"] != "auto":  # (along-N rows, e.g. ag_gemm_n, have no peer figure)
            continue
        base = next(x for x in rows if x["op"] == r["op"] and x["M"] == r["M"] and x["N"] == r["N"] and x["K"] == r["K"] and x["impl"] == "baseline")
        key = (OPS[r["op"]], r["M"], r["N"], r["K"])
        nccl = peer.get(key + ("nccl+cublas",))
        symm = peer.get(key + ("torch-symm",))
        sp = base["ms"] / r["ms"]
        vs_symm = symm / r["ms"] if symm else None
        per_op.setdefault(r["op"], []).append((sp, vs_symm, (symm and nccl) and nccl / symm, r.get("ideal_speedup")))
        peer_ms = f"{nccl:.3f} | {base['ms']:.3f} | {base['ms'] / nccl:.2f}" if nccl else f"n/a | {base['ms']:.3f} | n/a"
        symm_ms = f"{symm:.3f} | {vs_symm:.2f}x" if symm else "n/a | n/a"
        ran = r["ran"] + ("/sm90" if r.get("matmul") == "sm90" else "")  # pipelined_ce on the Hopper core
        print(f"| {OPS[r['op']]} | {r['M']} | {r['N']} | {r['K']} | {peer_ms} | {ran} | {r['ms']:.3f} | {sp:.2f}x | "
              f"{symm_ms} | {r['check']} |")
    print()
    for op, v in per_op.items():
        line = f"- W={W} {op}: auto geomean {geomean([x[0] for x in v]):.3f}x over the baseline (worst {min(x[0] for x in v):.3f}x)"
        of = of_ideal(v)
        if of:
            line += (f"; {of:.3f} of ideal's {geomean([x[3] for x in v]):.3f}x "
                     f"(worst shape {min(x[0] / x[3] for x in v):.2f})")
        if any(x[2] for x in v):
            line += f"; torch-symm geomean {geomean([x[2] for x in v]):.3f}x over the peers' NCCL+cuBLAS"
            line += f"; auto over torch-symm {geomean([x[1] for x in v]):.3f}x"
        print(line)
    # tpgemm's torch ops timed by the peers' script (its --fp8 runs), beside torch's fused ops.
    tp = [(symm, peer[k[:4] + ("tpgemm-op",)]) for k, symm in peer.items()
          if k[4] == "torch-symm" and k[:4] + ("tpgemm-op",) in peer]
    if tp:
        print(f"- W={W} tpgemm's torch ops over torch-symm's, same script: geomean "
              f"{geomean([s / t for s, t in tp]):.3f}x over {len(tp)} shapes (worst {min(s / t for s, t in tp):.3f}x)")
    print_gemm_targets(rows, W, per_op, peer)
    if len(sys.argv) > 3:
        par = json.load(open(sys.argv[3]))
        pa = {(r["M"], r["impl"]): r["ms"] for r in par}
        # Per call: each call timed alone and synchronised (how torch_peers.py times); back to back:
        # nccl-tests' method; graph: replayed from a CUDA graph, no host work per call.
        print("\n| bytes | NCCL (torch) call us | torch two-shot call us | tpgemm nccl call us | auto call us "
              "| nccl us | oneshot us | twoshot us | auto ran | auto us | nccl / auto | auto busbw GB/s "
              "| nccl graph us | auto graph us | nccl / auto (graph) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for b in sorted({r["bytes"] for r in rows if r["op"] == "allreduce"}):
            t = {r["impl"]: r for r in rows if r["op"] == "allreduce" and r["bytes"] == b}
            f = lambda k, key="ms": f"{t[k][key] * 1e3:.1f}" if k in t and t[k].get(key, 0) > 0 else "-"
            g = lambda k: f"{pa[(b, k)] * 1e3:.1f}" if (b, k) in pa else "-"
            a = t["auto"]
            ratio = t["nccl"]["ms"] / a["ms"] if a["ms"] > 0 else 0
            gratio = t["nccl"].get("graph_ms", 0) / a["graph_ms"] if a.get("graph_ms", 0) > 0 else 0
            print(f"| {b} | {g('nccl')} | {g('torch-twoshot')} | {f('nccl', 'call_ms')} | {f('auto', 'call_ms')} "
                  f"| {f('nccl')} | {f('oneshot')} | {f('twoshot')} | {a['ran']} | {f('auto')} | {ratio:.2f}x | {a['busbw_gbs']:.0f} "
                  f"| {f('nccl', 'graph_ms')} | {f('auto', 'graph_ms')} | {gratio:.2f}x |")
        print_allreduce_targets(rows, W)
    if cutlass:
        print_cutlass(rows, W, cutlass)


def print_cutlass(rows, W, cutlass):
    """ag_gemm's auto and fused against CUTLASS's Distributed GEMM timed in the same call."""
    print("\n| ag M | N | K | CUTLASS DistGEMM ms | check | tpgemm auto ms | auto vs CUTLASS | fused ms | fused vs CUTLASS |")
    print("|---|---|---|---|---|---|---|---|---|")
    vs_auto, vs_fused = [], []
    for r in rows:
        if r["op"] != "ag_gemm" or r["impl"] != "auto" or (r["M"], r["N"], r["K"]) not in cutlass:
            continue
        c = cutlass[(r["M"], r["N"], r["K"])]
        if c["ms"] <= 0:
            print(f"| {r['M']} | {r['N']} | {r['K']} | - | {c['check']} | {r['ms']:.3f} | - | - | - |")
            continue
        f = next((x for x in rows if x["op"] == "ag_gemm" and x["impl"] == "fused" and
                  (x["M"], x["N"], x["K"]) == (r["M"], r["N"], r["K"]) and x["ms"] > 0), None)
        a = c["ms"] / r["ms"]
        vs_auto.append(a)
        fused = f"{f['ms']:.3f} | {c['ms'] / f['ms']:.2f}x" if f else "- | -"
        if f:
            vs_fused.append(c["ms"] / f["ms"])
        print(f"| {r['M']} | {r['N']} | {r['K']} | {c['ms']:.3f} | {c['check']} | {r['ms']:.3f} | {a:.2f}x | {fused} |")
    if vs_auto:
        print(f"\n- W={W} ag_gemm: auto over CUTLASS's Distributed GEMM, geomean {geomean(vs_auto):.3f}x (worst "
              f"{min(vs_auto):.3f}x); fused {geomean(vs_fused):.3f}x (worst {min(vs_fused):.3f}x)")


# The performance targets of the GEMM ops (set at W=4; printed at every W, to follow them).
AUTO_TARGETS = {"gemm_rs": 1.5, "gemm_ar": 1.4}
FUSED_AG_TARGET, GEMM_ONLY_SLACK = 1.25, 1.05


def print_gemm_targets(rows, W, per_op, peer):
    """The targets as the rows above say them: every row checked and passed; `auto` never slower
    than the baseline; its geomean over the baseline for gemm_rs and gemm_ar, and against
    `ideal`'s (perfect overlap of the baseline's parts) for every op; for ag_gemm, `fused`
    itself, and, wherever the collective alone is shorter than the GEMM alone, fused within 5% of
    the GEMM-only time: tpgemm's (cuBLASLt, timed by tpgemm-bench) and the peers' (torch.matmul,
    timed by torch_peers.py)."""
    failed = [r for r in rows if r["check"] not in ("pass", "not run")]
    print(f"\n- W={W} `--check`: {len(rows) - len(failed)} of {len(rows)} rows passed or were not run"
          + ("".join(f"; FAILED {r['op']} {r['M']}x{r['N']}x{r['K']} {r['impl']}: {r['check']}" for r in failed)))
    for op, v in per_op.items():
        worst = min(x[0] for x in v)
        line = f"- W={W} {op}: auto never slower than the baseline (worst {worst:.3f}x): {'met' if worst >= 1.0 else 'not met'}"
        if op in AUTO_TARGETS:
            g = geomean([x[0] for x in v])
            line += f"; geomean {g:.3f}x (target >= {AUTO_TARGETS[op]}x): {'met' if g >= AUTO_TARGETS[op] else 'not met'}"
        of = of_ideal(v)
        if of:
            line += f"; {of:.3f} of ideal's geomean speedup (target >= 1): {'met' if of >= 1.0 else 'not met'}"
        print(line)
    fused = [r for r in rows if r["op"] == "ag_gemm" and r["impl"] == "fused" and r["ms"] > 0]
    if fused:
        g = geomean([r["baseline_ms"] / r["ms"] for r in fused])
        print(f"- W={W} ag_gemm fused: geomean {g:.3f}x over the baseline over {len(fused)} shapes "
              f"(target >= {FUSED_AG_TARGET}x): {'met' if g >= FUSED_AG_TARGET else 'not met'}")
        torch_only = lambda r, what: peer.get(("ag", r["M"], r["N"], r["K"], what), 0)
        for who, gemm, comm in (("tpgemm's", lambda r: r["gemm_only_ms"], lambda r: r["comm_only_ms"]),
                                ("the peers'", lambda r: torch_only(r, "gemm-only"), lambda r: torch_only(r, "comm-only"))):
            bound = [r for r in fused if 0 < comm(r) < gemm(r)]
            over = [r for r in bound if r["ms"] > GEMM_ONLY_SLACK * gemm(r)]
            print(f"- W={W} ag_gemm fused where the collective alone is shorter than the GEMM alone ({who} figures): "
                  f"within 5% of the GEMM-only time on {len(bound) - len(over)} of {len(bound)} shapes: "
                  f"{'met' if bound and not over else 'not met'}"
                  + "".join(f"; {r['M']}x{r['N']}x{r['K']} {r['ms'] / gemm(r):.3f}x of it" for r in over))


def print_allreduce_targets(rows, W):
    """The all-reduce targets, as the rows above say them: auto's graph-timed latency at most
    half of NCCL's up to 1 MB, and its bus bandwidth (back to back) at least NCCL's from 64 MB."""
    ar = [r for r in rows if r["op"] == "allreduce"]
    at = {(r["bytes"], r["impl"]): r for r in ar}
    sizes = sorted({r["bytes"] for r in ar})
    small = [(b, at[(b, "auto")]["graph_ms"] / at[(b, "nccl")]["graph_ms"]) for b in sizes
             if b <= 1 << 20 and at[(b, "nccl")].get("graph_ms", 0) > 0 and at[(b, "auto")].get("graph_ms", 0) > 0]
    large = [(b, at[(b, "auto")]["busbw_gbs"] / at[(b, "nccl")]["busbw_gbs"]) for b in sizes
             if b >= 64 << 20 and at[(b, "nccl")]["busbw_gbs"] > 0]
    if small:
        worst = max(small, key=lambda x: x[1])
        print(f"\n- W={W} all-reduce latency up to 1 MB (graph): auto at most {worst[1]:.2f}x of NCCL's (at {worst[0]} "
              f"bytes; target <= 0.5x): {'met' if worst[1] <= 0.5 else 'not met'}")
    if large:
        worst = min(large, key=lambda x: x[1])
        print(f"- W={W} all-reduce bus bandwidth from 64 MB: auto at least {worst[1]:.2f}x of NCCL's (at {worst[0]} "
              f"bytes; target >= 1x; within 2% is the spread of two timings of NCCL where auto runs it): "
              f"{'met' if worst[1] >= 1.0 else 'met within 2%' if worst[1] >= 0.98 else 'not met'}")

if __name__ == "__main__":
    main()
