"""PNG plots of an :class:`~phylorl.evaluation.methods.Evaluation` (matplotlib, Agg backend)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from .methods import Evaluation
from .metrics import mean_curve, normalised_trajectory

IMPROVEMENT_PNG = "improvement_by_taxa.png"
TRAJECTORY_PNG = "trajectory.png"


def write_plots(evaluation: Evaluation, directory: str | PathLike) -> list[Path]:
    """Write :data:`IMPROVEMENT_PNG` (score by method and taxon count) and :data:`TRAJECTORY_PNG` (mean
    best-so-far score against move number, per method) into ``directory``; returns their paths.

    The score is the improvement over the start tree relative to IQ-TREE, or ``ΔlogL`` without IQ-TREE.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    label = "improvement (1 = IQ-TREE)" if evaluation.has_reference else "ΔlogL (final − start)"
    methods = evaluation.settings["methods"]
    taxa = sorted(evaluation.by_taxa)

    def save(fig, name: str) -> Path:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        return out / name

    fig, ax = plt.subplots(figsize=(max(7.0, 2 + 0.25 * len(taxa) * len(methods)), 4))
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(taxa))
    for i, method in enumerate(methods):
        values = [evaluation.by_taxa[n].get(method) for n in taxa]
        heights = [np.nan if v is None else v for v in values]
        ax.bar(x + (i - (len(methods) - 1) / 2) * width, heights, width, label=method)
    ax.set_xticks(x, [str(n) for n in taxa])
    ax.set(xlabel="taxa", ylabel=label, title="Mean score by method and taxon count")
    if evaluation.has_reference:
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    paths = [save(fig, IMPROVEMENT_PNG)]

    fig, ax = plt.subplots(figsize=(7, 4))
    for method in methods:
        if method == "iqtree":
            continue
        curve = mean_curve([normalised_trajectory(r) for r in evaluation.rows if r.method == method])
        if curve:
            ax.plot(range(len(curve)), curve, label=method)
    if evaluation.has_reference and "iqtree" in methods:
        ax.axhline(1.0, color="black", lw=0.8, ls="--", label="iqtree")
    ax.set(xlabel="move", ylabel=f"best so far: {label}", title="Mean trajectory per method")
    ax.legend(fontsize="small")
    return [*paths, save(fig, TRAJECTORY_PNG)]
