"""Plot ``bench_search_large`` results against the number of taxa: the final log-likelihood's gap to
IQ-TREE's and the whole-process time against IQ-TREE's, one point per alignment.

    python benchmarks/plot_search_large.py RESULT.json ... --out docs/results/DATE-COMMIT-by-size.png

Reads the per-alignment rows of each file (at its top level or in its ``runs``); where two files hold the same
alignment, the later file's row is drawn. Rows without a time against IQ-TREE (our search alone) are drawn in
the gap panel only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def rows_of(path: Path) -> list[dict]:
    """Every per-alignment row of a ``bench_search_large`` result file."""
    data = json.loads(path.read_text())
    runs = data.get("runs", [data])
    return [row for run in runs for row in run.get("rows", []) if "gap" in row]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=Path, help="bench_search_large JSON files")
    p.add_argument("--out", type=Path, required=True, help="the PNG to write")
    args = p.parse_args()
    rows = {row["file"]: row for path in args.results for row in rows_of(path)}
    if not rows:
        raise SystemExit("plot_search_large: no per-alignment rows in the files given")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    taxa = [row["taxa"] for row in rows.values()]
    fig, (gap_ax, time_ax) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    gap_ax.scatter(taxa, [row["gap"] for row in rows.values()], s=18)
    gap_ax.axhline(-0.1, color="grey", lw=0.8, ls="--", label="IQ-TREE − 0.1")
    gap_ax.set_yscale("symlog", linthresh=1.0)
    gap_ax.set(ylabel="log-likelihood − IQ-TREE's", title="Our search against IQ-TREE 2, by size")
    gap_ax.legend(fontsize="small")
    timed = [row for row in rows.values() if row.get("time_ratio") is not None]
    time_ax.scatter([row["taxa"] for row in timed], [row["time_ratio"] for row in timed], s=18)
    time_ax.axhline(1.0, color="grey", lw=0.8, ls="--", label="IQ-TREE's time")
    time_ax.set(xscale="log", yscale="log", xlabel="taxa", ylabel="wall time / IQ-TREE's")
    time_ax.legend(fontsize="small")
    plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}")
    time_ax.set_xticks([30, 50, 100, 200, 500, 1000])
    time_ax.set_yticks([0.25, 0.5, 1, 2, 4])
    gap_ax.set_yticks([-1, 0, 1, 10, 100])
    for axis in (time_ax.xaxis, time_ax.yaxis, gap_ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(json.dumps({"plot": str(args.out), "alignments": len(rows), "timed": len(timed)}))


if __name__ == "__main__":
    main()
