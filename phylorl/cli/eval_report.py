"""Terminal output of ``phylorl eval``: the rich progress bar (stderr) and the result tables (stdout)."""

from __future__ import annotations

import sys


def _fmt(value, spec: str = ".3f", missing: str = "n/a") -> str:
    return missing if value is None else format(value, spec)


def print_tables(evaluation, console=None) -> None:
    """Per-method summary, then the score per taxon count, of an
    :class:`~phylorl.evaluation.methods.Evaluation`."""
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # a file or pipe: wide enough that no header is cut
            console = Console(width=130)
    settings, ref = evaluation.settings, evaluation.has_reference
    steps = settings["steps"] if settings["steps"] is not None else "2n"
    title = (
        f"{len(evaluation.alignments)} alignment(s) x {settings['starts']} "
        f"{settings.get('start', 'random')} start(s), "
        f"{steps} moves (seed {settings['seed']}); final = best tree seen"
    )
    tol = f"{settings['tolerance']:g}"
    caption = (
        f"improvement = (final − start) / (IQ-TREE − start), or 1 if within {tol} of IQ-TREE (else 0) "
        f"when IQ-TREE gains < {settings['min_gain']:g}; best of K: mean over alignments of the best start"
        if ref
        else "no IQ-TREE reference (--no-iqtree): improvement is undefined; ΔlogL = final − start"
    )
    table = Table(title=title)
    columns = (
        ["method", "runs"]
        + (["improvement", "best of K", f"within {tol}", "RF (norm.)"] if ref else [])
        + ["ΔlogL", "evaluations", "seconds"]
        + (["/ IQ-TREE time"] if ref else [])
    )
    for column in columns:
        table.add_column(
            column, justify="left" if column == "method" else "right", no_wrap=column == "method"
        )
    for s in evaluation.summary:
        cells = [s.method, str(s.runs)]
        if ref:
            within = None if s.fraction_within_tolerance is None else 100 * s.fraction_within_tolerance
            cells += [
                _fmt(s.mean_improvement),
                _fmt(s.mean_best_of_k_improvement),
                "n/a" if within is None else f"{within:.0f}%",
                _fmt(s.mean_rf_normalised, ".2f"),
            ]
        cells += [
            _fmt(s.mean_delta_loglik, ".2f"),
            _fmt(s.mean_evaluations, ".0f", "-"),
            _fmt(s.mean_seconds, ".2f"),
        ]
        if ref:
            cells.append(_fmt(s.seconds_ratio_to_iqtree, ".2f"))
        table.add_row(*cells)
    console.print(table)
    console.print(caption, soft_wrap=True)

    methods = [s.method for s in evaluation.summary]
    score = "mean improvement" if ref else "mean ΔlogL (no IQ-TREE: improvement undefined)"
    by_taxa = Table(title=f"{score} by taxon count")
    by_taxa.add_column("taxa", justify="right")
    by_taxa.add_column("alignments", justify="right")
    for method in methods:
        by_taxa.add_column(method, justify="right", no_wrap=True)
    for n, values in evaluation.by_taxa.items():
        count = sum(1 for a in evaluation.alignments if a.n_taxa == n)
        by_taxa.add_row(str(n), str(count), *(_fmt(values.get(m), ".3f" if ref else ".2f") for m in methods))
    console.print(by_taxa)
    if ref:
        bands = Table(title="by taxa band: fraction within 0.1 of IQ-TREE · time over IQ-TREE's")
        bands.add_column("taxa", justify="right")
        for method in methods:
            bands.add_column(method, justify="right", no_wrap=True)
        for band, values in evaluation.by_band.items():
            bands.add_row(band, *(_band_cell(values.get(m)) for m in methods))
        console.print(bands)


def _band_cell(summary) -> str:
    if summary is None:
        return "-"
    within = "-" if summary.fraction_within_tolerance is None else f"{summary.fraction_within_tolerance:.0%}"
    ratio = "-" if summary.seconds_ratio_to_iqtree is None else f"{summary.seconds_ratio_to_iqtree:.2f}x"
    return f"{within} · {ratio}"


class Progress:
    """A rich progress bar on stderr; ``advance(label)`` starts the next of ``total`` units."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("[bold]eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self._task = self._bar.add_task("", total=total)
        self._started = False

    def __enter__(self):
        self._bar.__enter__()
        return self.advance

    def advance(self, label: str) -> None:
        self._bar.update(self._task, advance=1 if self._started else 0, description=label)
        self._started = True
        if not self._bar.console.is_terminal:  # no live bar (a log, CI): one plain line per unit
            task = self._bar.tasks[0]
            print(
                f"eval {int(task.completed) + 1}/{int(task.total)} {task.elapsed or 0.0:.0f}s {label}",
                file=sys.stderr,
                flush=True,
            )

    def __exit__(self, *exc):
        if exc[0] is None and self._started:
            self._bar.update(self._task, advance=1)
        self._bar.__exit__(*exc)
