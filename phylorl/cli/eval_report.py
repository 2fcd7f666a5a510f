"""Terminal output of ``phylorl eval``: the rich progress bar (stderr) and the result tables (stdout)."""

from __future__ import annotations

import contextlib

from phylorl.cli.common import status


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
        f"{len(evaluation.alignments)} alignment(s) x {settings['starts']} {settings.get('start', 'random')} "
        f"start(s), {steps} moves (seed {settings['seed']}); final = best tree seen"
    )
    tol = f"{settings['tolerance']:g}"
    caption = (
        f"improvement = (final − start) / (IQ-TREE − start), or 1 if within {tol} of IQ-TREE (else 0) "
        f"when IQ-TREE gains < {settings['min_gain']:g}; best of K: mean over alignments of the best start"
        if ref
        else "no IQ-TREE reference (--no-iqtree): improvement is undefined; ΔlogL = final − start"
    )
    # each column after method and runs: its header, the summary's field and its format
    metrics = [("ΔlogL", "mean_delta_loglik", ".2f"), ("evaluations", "mean_evaluations", ".0f")]
    metrics += [("seconds", "mean_seconds", ".2f")]
    if ref:
        metrics = [
            ("improvement", "mean_improvement", ".3f"),
            ("best of K", "mean_best_of_k_improvement", ".3f"),
            (f"within {tol}", "fraction_within_tolerance", ".0%"),
            ("RF (norm.)", "mean_rf_normalised", ".2f"),
            *metrics,
            ("/ IQ-TREE time", "seconds_ratio_to_iqtree", ".2f"),
        ]
    table = Table(title=title)
    table.add_column("method", no_wrap=True)
    for header in ["runs"] + [header for header, _, _ in metrics]:
        table.add_column(header, justify="right")
    for s in evaluation.summary:
        cells = [
            _fmt(getattr(s, name), spec, "-" if name == "mean_evaluations" else "n/a")
            for _, name, spec in metrics
        ]
        table.add_row(s.method, str(s.runs), *cells)
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


@contextlib.contextmanager
def progress(total: int):
    """A rich progress bar on stderr; yields ``advance(label)``, which starts the next of ``total`` units."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}")]
    bar = Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True))
    task, started = bar.add_task("", total=total), False

    def advance(label: str) -> None:
        nonlocal started
        bar.update(task, advance=1 if started else 0, description=label)
        started = True
        if not bar.console.is_terminal:  # no live bar (a log, CI): one plain line per unit
            done = bar.tasks[0]
            status(f"eval {int(done.completed) + 1}/{int(done.total)} {done.elapsed or 0.0:.0f}s {label}")

    with bar:
        yield advance
        if started:
            bar.update(task, advance=1)
