#!/usr/bin/env python3
"""The plots of docs/perf.md, from tpgemm-bench's JSON: one command regenerates them.

    python3 bench/plot.py [--out docs/perf]

shared_shapes.png: `auto`'s speedup over the baseline per shared shape, per op, W=2 and W=4, and
`ideal`'s (baseline / max(matmul alone, collective alone)) beside it.
random_shapes.png: `auto`'s time against the fastest implementation of each random shape, over
the baseline's time (how long the shape takes), per op and W.
fp8.png: per shared shape, `auto` with e4m3 operands against `auto` with bf16 and against the e4m3
baseline, from pairs of runs (e4m3 JSON, bf16 JSON) made in the same call; a later pair's shape
replaces an earlier one's.
The JSON files are the ones docs/perf.md cites; pass others with --shared / --random / --fp8."""
import argparse
import collections
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
X4 = os.path.join(HERE, "results/2026-11-26-h200x4-push")
MAIN = os.path.join(HERE, "results/2026-11-28-h200x4/call1")
SHARED = [os.path.join(MAIN, f"bench_W{w}.json") for w in (2, 4)]
RANDOM = [os.path.join(HERE, f"results/2026-11-28-random-draws/call1/random_W{w}.json") for w in (2, 3, 4)]
FP8 = ([os.path.join(HERE, f"results/2026-11-26-fp8-gather/dtypes_W2_{d}_tensor.json") for d in ("e4m3", "bf16")]
       + [os.path.join(X4, f"call3/dtypes_W4_{d}_tensor.json") for d in ("e4m3", "bf16")])
OPS = ("ag_gemm", "gemm_rs", "gemm_ar")


def shapes(path):
    """{(op, W, M, N, K): {impl: row}} of the rows that have a time."""
    out = collections.defaultdict(dict)
    with open(path) as f:
        for r in json.load(f)["rows"]:
            if r["ms"] > 0 and r["op"] in OPS:
                out[(r["op"], r["W"], r["M"], r["N"], r["K"])][r["impl"]] = r
    return out


def plot_shared(paths, out):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for ax, op in zip(axes, OPS):
        labels, bars = [], collections.defaultdict(list)
        for path in paths:
            for (o, w, m, n, k), v in sorted(shapes(path).items()):
                if o != op or "auto" not in v:
                    continue
                labels.append(f"W={w}\n{m}x{n}x{k}")
                bars["auto"].append(v["baseline"]["ms"] / v["auto"]["ms"])
                bars["ideal"].append(v["auto"].get("ideal_speedup", 0))
        x = range(len(labels))
        ax.bar(x, bars["auto"], color="tab:blue", label="auto")
        ax.scatter(x, bars["ideal"], marker="_", s=300, color="black", zorder=3,
                   label="ideal: perfect overlap of the baseline's parts")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.legend(fontsize=7, loc="lower right")
        ax.set_xticks(list(x), labels, rotation=90, fontsize=7)
        ax.set_title(op)
    axes[0].set_ylabel("auto: speedup over NCCL + cuBLAS")
    folders = sorted({os.path.relpath(os.path.dirname(p), HERE) for p in paths})
    fig.suptitle("Shared shapes: auto over the baseline (" + ", ".join(folders) + ")", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_random(paths, out):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    colors = {2: "tab:blue", 3: "tab:green", 4: "tab:red"}
    for ax, op in zip(axes, OPS):
        for path in paths:
            xs, ys, w = [], [], None
            for (o, w, m, n, k), v in shapes(path).items():
                if o != op or "auto" not in v:
                    continue
                best = min(r["ms"] for i, r in v.items() if i != "auto")
                xs.append(v["baseline"]["ms"] * 1e3)
                ys.append(best / v["auto"]["ms"])
            if xs:
                ax.scatter(xs, ys, s=12, color=colors.get(w, "gray"), label=f"W={w}")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.axhline(0.97, color="gray", lw=0.6, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("baseline time per call (us)")
        ax.set_title(op)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("fastest implementation's time / auto's")
    fig.suptitle("Random shapes: auto against the fastest implementation of each shape (graph-timed)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_fp8(paths, out):
    """paths: e4m3 and bf16 JSON files, alternating."""
    rows = {}
    for e4m3, bf16 in zip(paths[0::2], paths[1::2]):
        e, b = shapes(e4m3), shapes(bf16)
        for key, v in e.items():
            if "auto" in v and "baseline" in v and "auto" in b.get(key, {}):
                rows[key] = (b[key]["auto"]["ms"] / v["auto"]["ms"], v["baseline"]["ms"] / v["auto"]["ms"])
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for ax, op in zip(axes, OPS):
        keys = sorted(k for k in rows if k[0] == op)
        x = range(len(keys))
        ax.bar([i - 0.2 for i in x], [rows[k][0] for k in keys], width=0.4, color="tab:blue",
               label="e4m3 auto over bf16 auto")
        ax.bar([i + 0.2 for i in x], [rows[k][1] for k in keys], width=0.4, color="tab:orange",
               label="e4m3 auto over the e4m3 baseline")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xticks(list(x), [f"W={k[1]}\n{k[2]}x{k[3]}x{k[4]}" for k in keys], rotation=90, fontsize=7)
        ax.set_title(op)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("speedup")
    fig.suptitle("FP8 (e4m3, D in bf16) on the shared shapes (" + ", ".join(os.path.relpath(p, HERE) for p in paths[:1])
                 + " ...)", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "perf"))
    ap.add_argument("--shared", nargs="*", default=SHARED)
    ap.add_argument("--random", nargs="*", default=RANDOM)
    ap.add_argument("--fp8", nargs="*", default=FP8, help="e4m3 and bf16 JSON files, alternating")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    plot_shared(a.shared, os.path.join(a.out, "shared_shapes.png"))
    plot_random(a.random, os.path.join(a.out, "random_shapes.png"))
    plot_fp8(a.fp8, os.path.join(a.out, "fp8.png"))
    print("wrote shared_shapes.png, random_shapes.png and fp8.png in", a.out)


if __name__ == "__main__":
    main()
