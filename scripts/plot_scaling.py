#!/usr/bin/env python3
"""The plots of docs/scaling.md, from the data beside them in docs/scaling/.

    scripts/plot_scaling.py [DIR]        (default: docs/scaling)

Reads, in DIR:
  model.csv        bench/scaling_model's output: each algorithm's modelled time against P
  negotiation.csv  tests/inproc/negotiation_scale --csv: what the negotiation moves per step
  hosts.log        bench/run_bench_hosts.sh's output (optional): measured across fake hosts
Writes model.png, negotiation.png and, with hosts.log, hosts.png. Needs Debian's
python3-matplotlib.
"""
import csv
import re
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "gather": ("gather-all", "tab:gray", "s"),
    "direct": ("direct (O(P) messages)", "tab:red", "v"),
    "doubling": ("recursive doubling", "tab:blue", "o"),
    "halving": ("halving-doubling", "tab:green", "^"),
    "ring": ("ring (MPI large-message, NCCL ring)", "tab:orange", "x"),
    "tree": ("NCCL double binary tree", "tab:purple", "+"),
    "two-level": ("two levels, 4 ranks per host", "tab:brown", "D"),
    "flat-shared-port": ("flat choice, 4 ranks sharing a port", "tab:pink", "d"),
}


def size_label(n):
    n = int(n)
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def plot_model(rows, out):
    by_size = defaultdict(lambda: defaultdict(list))
    chosen = defaultdict(list)
    for r in rows:
        p, n, s = int(r["ranks"]), int(r["bytes"]), float(r["seconds"])
        by_size[n][r["algorithm"]].append((p, s))
        if r["chosen"] == "1":
            chosen[n].append((p, s))
    sizes = sorted(by_size)
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4.2))
    for ax, n in zip(axes, sizes):
        for name, points in by_size[n].items():
            label, color, marker = STYLE[name]
            points.sort()
            ax.plot([p for p, _ in points], [s * 1e6 for _, s in points], marker=marker,
                    color=color, label=label, markersize=4, linewidth=1)
        points = sorted(chosen[n])
        ax.plot([p for p, _ in points], [s * 1e6 for _, s in points], color="black",
                linewidth=3, alpha=0.25, label="Chorus's choice")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"allreduce of {size_label(n)}")
        ax.set_xlabel("ranks P")
        ax.set_ylabel("modelled time (us)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_negotiation(rows, out):
    new = sorted((int(r["ranks"]), r) for r in rows if r["step"] == "1")
    cached = sorted((int(r["ranks"]), r) for r in rows if r["step"] == "2")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    left.plot([p for p, _ in new], [int(r["gathered_bytes"]) for _, r in new], "o-",
              label="bytes into rank 0 (gather)")
    left.plot([p for p, _ in new], [int(r["broadcast_bytes"]) for _, r in new], "s-",
              label="bytes broadcast")
    left.set_title("step of new names (coordinator)")
    left.set_yscale("log")
    left.set_ylabel("bytes")
    right.plot([p for p, _ in cached], [int(r["and_messages"]) for _, r in cached], "o-",
               label="AND messages per rank (recursive doubling)")
    right.plot([p for p, _ in cached], [int(r["gathers"]) for _, r in cached], "s-",
               label="gathers")
    right.set_title("step of cached names (bit vector AND)")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks P (threads of one process)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


# "=== 2 hosts x 2 ranks: ... (CHORUS_HOST_ALGORITHM=auto) ===" then allreduce_bench's
# Case 1 rows "| 64 MiB | chorus ... | 7.71 ms | ...".
HEADER = re.compile(r"^=== (\d+) hosts x (\d+) ranks: .*CHORUS_HOST_ALGORITHM=(\w+)")
ROW = re.compile(r"^\| (\d+ (?:KiB|MiB|B)) \| ([^|]+?) \| ([\d.]+) (us|ms|s) \|")


def parse_hosts(text):
    runs = []
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            runs.append({"layout": f"{m[1]}x{m[2]}", "algorithm": m[3], "rows": []})
            continue
        m = ROW.match(line)
        if m and runs:
            scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m[4]]
            runs[-1]["rows"].append((m[1], m[2].strip(), float(m[3]) * scale))
    return runs


def plot_hosts(runs, out):
    sizes = []
    for run in runs:
        for size, _, _ in run["rows"]:
            if size not in sizes:
                sizes.append(size)
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        labels, chorus, raw = [], [], []
        for run in runs:
            methods = {m: t for s, m, t in run["rows"] if s == size}
            raw_t = next((t for m, t in methods.items() if m.startswith("raw")), None)
            ours = next((t for m, t in methods.items() if m.startswith("chorus")), None)
            if raw_t is None or ours is None:
                continue
            labels.append(f"{run['layout']}\n{run['algorithm']}")
            chorus.append(ours * 1e3)
            raw.append(raw_t * 1e3)
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], raw, width=0.4, label="raw MPI_Allreduce")
        ax.bar([x + 0.2 for x in xs], chorus, width=0.4, label="Chorus")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(f"{size}, across fake hosts (TCP)")
        ax.set_ylabel("median time (ms)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/scaling")
    with open(folder / "model.csv") as f:
        plot_model(list(csv.DictReader(f)), folder / "model.png")
    with open(folder / "negotiation.csv") as f:
        plot_negotiation(list(csv.DictReader(f)), folder / "negotiation.png")
    hosts = folder / "hosts.log"
    if hosts.exists():
        runs = parse_hosts(hosts.read_text())
        if not runs:
            sys.exit(f"plot_scaling.py: no runs found in {hosts}")
        plot_hosts(runs, folder / "hosts.png")
    print(f"plot_scaling.py: wrote the plots in {folder}")


if __name__ == "__main__":
    main()
