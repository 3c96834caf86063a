#!/usr/bin/env python3
"""The plots of docs/perf.md, from tpgemm-bench's JSON: one command regenerates them.

    python3 bench/plot.py [--out docs/perf]

shared_shapes.png: `auto`'s speedup over the baseline per shared shape, per op, W=2 and W=4.
random_shapes.png: `auto`'s time against the fastest implementation of each random shape, over
the baseline's time (how long the shape takes), per op and W.
The JSON files are the ones docs/perf.md cites; pass others with --shared / --random."""
import argparse
import collections
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = [os.path.join(HERE, "results/2026-11-23-prologue/final2-h200x2/bench_W2.json"),
          os.path.join(HERE, "results/2026-11-22-fused-ar/final-h200x4/bench_W4.json")]
RANDOM = [os.path.join(HERE, f"results/2026-11-26-planner-ties/random_W{w}.json") for w in (2, 3, 4)]
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
        x = range(len(labels))
        ax.bar(x, bars["auto"], color="tab:blue")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xticks(list(x), labels, rotation=90, fontsize=7)
        ax.set_title(op)
    axes[0].set_ylabel("auto: speedup over NCCL + cuBLAS")
    fig.suptitle("Shared shapes: auto over the baseline (" + ", ".join(os.path.relpath(p, HERE) for p in paths) + ")",
                 fontsize=8)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "perf"))
    ap.add_argument("--shared", nargs="*", default=SHARED)
    ap.add_argument("--random", nargs="*", default=RANDOM)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    plot_shared(a.shared, os.path.join(a.out, "shared_shapes.png"))
    plot_random(a.random, os.path.join(a.out, "random_shapes.png"))
    print("wrote", os.path.join(a.out, "shared_shapes.png"), "and", os.path.join(a.out, "random_shapes.png"))


if __name__ == "__main__":
    main()
