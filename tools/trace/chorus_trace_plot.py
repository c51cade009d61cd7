#!/usr/bin/env python3
"""The picture of `chorus-trace plot`, from the per-step summary it computes.

    tools/trace/chorus_trace_plot.py SUMMARY.json -o OUT.png [--title TEXT]

SUMMARY.json is {"ranks": [...], "steps": [{"step", "slowest_rank", "ranks": [{"rank",
"step_ms", "compute_ms", "peers_ms", "reduce_ms"}, ...]}, ...]}: each rank's time in a step
split into computing, waiting for peers and waiting while the reduction runs. A rank absent
from a step has no data there. Draws a 1200 x 900 PNG of two panels:
  top     each rank's mean step as a stacked bar (compute / waiting for peers / reducing),
          with the rank most often the slowest (longest compute) named in its title
  bottom  a heat map of waiting-for-peers ms, ranks x steps (grey: no data)
Problems go to stderr as "chorus-trace plot: ..." with exit status 2. Needs Debian's
python3-matplotlib.
"""
import argparse
import json
import sys
from bisect import bisect_left
from collections import Counter


def fail(problem):
    print(f"chorus-trace plot: {problem}", file=sys.stderr)
    sys.exit(2)


try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
    import numpy as np  # noqa: E402
    from matplotlib.ticker import MaxNLocator  # noqa: E402
except ImportError as e:
    fail(f"needs python3-matplotlib ({e})")

PARTS = (("compute_ms", "computing", "tab:blue"),
         ("peers_ms", "waiting for peers", "tab:red"),
         ("reduce_ms", "reducing", "tab:green"))


def load(path):
    """Returns (ranks, steps, cells): cells[(rank, column)] = that rank's entry in steps[column]."""
    try:
        with open(path) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {path}: {e}")
    try:
        steps = sorted(summary["steps"], key=lambda s: int(s["step"]))
        ranks = {int(r) for r in summary.get("ranks", [])}
        cells = {}
        for col, step in enumerate(steps):
            for entry in step["ranks"]:
                cells[(int(entry["rank"]), col)] = {k: float(entry[k]) for k, _, _ in PARTS}
                ranks.add(int(entry["rank"]))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        fail(f"{path} is not a chorus-trace summary ({type(e).__name__}: {e})")
    if not steps:
        fail(f"{path} has no steps")
    return sorted(ranks), steps, cells


def ticks(axis, numbers, nbins):
    """Ticks at the columns 0.. whose numbers (sorted) are the round ones, at most about nbins."""
    values = MaxNLocator(nbins=nbins, integer=True).tick_values(numbers[0], numbers[-1])
    cols = sorted({bisect_left(numbers, v) for v in values if numbers[0] <= v <= numbers[-1]})
    axis.set_ticks(cols, [str(numbers[c]) for c in cols])


def plot(ranks, steps, cells, title, out):
    fig, (bars, heat) = plt.subplots(2, 1, figsize=(12, 9), layout="constrained")
    fig.suptitle(title or f"Chorus timeline: {len(ranks)} ranks, {len(steps)} steps",
                 fontsize=14)

    xs = np.arange(len(ranks))
    bottom = np.zeros(len(ranks))
    for key, label, color in PARTS:
        means = np.array([np.mean([cells[(r, c)][key] for c in range(len(steps))
                                   if (r, c) in cells] or [0.0]) for r in ranks])
        bars.bar(xs, means, bottom=bottom, color=color, label=label, width=0.8)
        bottom += means
    slowest = Counter(s["slowest_rank"] for s in steps if s.get("slowest_rank") is not None)
    headline = "per-rank step breakdown"
    if slowest:
        rank, times = slowest.most_common(1)[0]
        headline += f": rank {rank} slowest in {times} of {sum(slowest.values())} steps"
        if rank in ranks:
            bars.bar([ranks.index(rank)], [bottom[ranks.index(rank)]], width=0.8,
                     fill=False, edgecolor="black", linewidth=1.5)
    for x, r in enumerate(ranks):
        if not any((r, c) in cells for c in range(len(steps))):
            bars.text(x, 0, "no data", ha="center", va="bottom", rotation=90, color="grey")
    bars.set_title(headline)
    bars.set_xlabel("rank")
    bars.set_ylabel(f"ms per step (mean over {len(steps)} steps)")
    bars.set_xlim(-0.6, len(ranks) - 0.4)
    ticks(bars.xaxis, ranks, 32)
    bars.grid(True, axis="y", alpha=0.3)
    bars.set_ylim(0, max(bottom.max(), 1e-9) * 1.15)
    bars.legend(loc="upper right", ncol=3, fontsize=9)

    peers = np.full((len(ranks), len(steps)), np.nan)
    for (r, c), cell in cells.items():
        peers[ranks.index(r), c] = cell["peers_ms"]
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("lightgrey")
    # The colours span up to the 98th percentile, so that one long step (the first, with
    # the job's start-up) does not flatten the rest; longer waits take the top colour.
    known = peers[~np.isnan(peers)]
    top = max(float(np.percentile(known, 98)) if known.size else 0.0, 1e-3)
    image = heat.imshow(np.ma.masked_invalid(peers), aspect="auto", cmap=cmap,
                        interpolation="nearest", origin="lower", vmin=0, vmax=top)
    fig.colorbar(image, ax=heat, label="waiting for peers, ms",
                 extend="max" if known.size and known.max() > top else "neither")
    heat.set_title("waiting for peers per step" +
                   (" (grey: no data)" if np.isnan(peers).any() else ""))
    heat.set_xlabel("step")
    heat.set_ylabel("rank")
    ticks(heat.xaxis, [int(s["step"]) for s in steps], 20)
    ticks(heat.yaxis, ranks, 16)

    try:
        fig.savefig(out, dpi=100)
    except (OSError, ValueError) as e:
        fail(f"cannot write {out}: {e}")


def main():
    parser = argparse.ArgumentParser(description="Draws a chorus-trace per-step summary.")
    parser.add_argument("summary", help="the JSON summary chorus-trace plot wrote")
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("--title", help='default: "Chorus timeline: N ranks, M steps"')
    args = parser.parse_args()
    plot(*load(args.summary), args.title, args.output)


if __name__ == "__main__":
    main()
