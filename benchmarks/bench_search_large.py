"""The large-scale search (:func:`phylorl.search.search`) against IQ-TREE 2 at 30-1,000 taxa, per taxa band.

For every alignment, one process at a time: the model string our preparation estimates (``GTR+F+G4`` on the NJ
tree, :func:`~phylorl.search.prepare.fit_model_string`); IQ-TREE 2 with that fixed string, ``--threads``
threads (default one), seed 1 (and seed 2 with ``--noise``: IQ-TREE's own run-to-run spread); then our search
as a child process from its default start, with as many perturb-and-climb processes (whole-process wall time:
interpreter, imports, alignment, model fit, start tree, search, final branch lengths). Both trees are
re-scored by our engine with every branch optimised. IQ-TREE runs are cached in ``--cache`` (see
:func:`cached_iqtree`); its wall time is re-measured in this run unless ``--cached-iqtree`` (then the cached
time is used and the row says so). ``--side-by-side`` runs IQ-TREE and our search at the same time, each on
its own cores (``--threads`` each), so that both see the same machine (the row says so).

Prints one JSON line: the machine, per-alignment rows (log-likelihoods, gap to IQ-TREE, seconds on both sides,
time ratio, RF distance, our peak memory: the main process's and the largest worker's) and per-band summaries
(fraction within 0.1 of IQ-TREE, mean and median gap, total time ratio, median per-alignment ratio, mean RF;
the same for IQ-TREE seed 2 with ``--noise``; ``--noise-only`` gives those alone, from IQ-TREE's cached seed-1
run and no search of ours). Progress on stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby, islice
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from common import REPO, add_flags, emit, log, machine  # noqa: E402

VALID = REPO.parent / "shared" / "data" / "large" / "valid"
BANDS = ((30, 99), (100, 199), (200, 499), (500, 999))
TOLERANCE = 0.1
# IQ-TREE is the fixed reference: one seed on every row whatever ``--seed`` our search runs with; ``--noise``
# adds a run with the next seed.
IQTREE_SEED = 1
IQTREE_NOISE_SEED = IQTREE_SEED + 1

# IQ-TREE runs cached on disk: at 500-1,000 taxa one takes tens of minutes. A run is found again by the
# alignment file's content, the seed, the threads and a model string equal up to a relative 1e-3 in each
# number (the fitted string can differ in its last digits between engine versions; a search under a model that
# close is the same search); the entry records the exact string it ran under, and its tree is re-scored under
# the current one.
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")


def same_model(a: str, b: str, rtol: float = 1e-3) -> bool:
    """Whether two model strings differ at most in their numbers, each by less than ``rtol`` (relative)."""
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return False
    return all(
        abs(float(x) - float(y)) <= rtol * max(abs(float(x)), abs(float(y)))
        for x, y in zip(NUMBER.findall(a), NUMBER.findall(b))
    )


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def find_cached(cache_dir, fasta, model: str, seed: int, threads: int) -> dict | None:
    """A cached run of this alignment, seed and threads under ``model`` or a model within
    :func:`same_model`."""
    content = digest(Path(fasta).read_bytes())
    for path in sorted(Path(cache_dir).glob(f"{Path(fasta).stem}.s{seed}.t{threads}.*.json")):
        run = json.loads(path.read_text())
        if run.get("content", content) == content and same_model(run["model"], model):
            return run
    return None


def run_iqtree(fasta, model: str, seed: int, threads: int) -> dict:
    """One IQ-TREE search: ``{"newick", "seconds", "reported_loglik", "model", "seed", "threads"}``."""
    with tempfile.TemporaryDirectory(prefix="iqtree-") as work:
        prefix = Path(work) / "ml"
        cmd = ["iqtree2", "-s", str(fasta), "-m", model, "-nt", str(threads), "-seed", str(seed), "-redo"]
        cmd += ["-quiet", "-pre", str(prefix)]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        treefile = Path(f"{prefix}.treefile")
        if proc.returncode != 0 or not treefile.exists():
            raise RuntimeError(f"iqtree2 failed on {fasta}: {proc.stderr[-500:]}")
        text = Path(f"{prefix}.iqtree").read_text() if Path(f"{prefix}.iqtree").exists() else ""
        found = re.search(r"Log-likelihood of the tree:\s*(\S+)", text)
        return {
            "newick": treefile.read_text().strip(),
            "seconds": seconds,
            "reported_loglik": float(found.group(1)) if found else None,
            "model": model,
            "seed": seed,
            "threads": threads,
            "load_avg_1m": round(os.getloadavg()[0], 2),
        }


def cached_iqtree(cache_dir, fasta, model: str, seed: int, threads: int, rerun=False) -> tuple[dict, bool]:
    """``(run, fresh)``: the cached run when there is one (and not ``rerun``), else a new run, stored (named
    by the alignment, seed, threads, the alignment's content and the model)."""
    cached = None if rerun else find_cached(cache_dir, fasta, model, seed, threads)
    if cached is not None:
        return cached, False
    run = run_iqtree(fasta, model, seed, threads)
    run["content"] = digest(Path(fasta).read_bytes())
    name = f"{Path(fasta).stem}.s{seed}.t{threads}.{run['content']}.{digest(model.encode())}.json"
    path = Path(cache_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(run, fh)
    os.replace(tmp, path)
    return run, True


def child(path: str, seed: int, config: str) -> None:
    """The measured process: our whole search of one alignment; prints its result as JSON."""
    from phylorl.phylo import load_alignment, write_newick
    from phylorl.search import SearchConfig, search

    alignment = load_alignment(path)
    result = search(alignment, "GTR+F+G4", config=SearchConfig(**json.loads(config)), seed=seed)
    out = {"newick": write_newick(result.tree), "loglik": result.loglik, "model": result.model}
    out["search_seconds"] = result.seconds
    for name in ("prepare_seconds", "start_loglik", "rounds", "moves", "scored", "dropped"):
        out[name] = getattr(result, name)
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["worker_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps(out))


def costs(sizes: list[int], sites: int, seed: int) -> dict:
    """Per-state and per-alignment costs against the number of taxa, on alignments simulated on realistic
    trees (GTR+G4, ``sites`` sites): move enumeration (every subtree's regrafts within radius 5, and every
    move), the parsimony pass (stepwise addition, one parsimony SPR round of radius 6), preparation (NJ, the
    environment's 100-replicate NJ bootstrap, model fit, Newton passes over every branch) and one fast lazy
    SPR round (radius 5)."""
    import numpy as np

    from phylorl.phylo import LikelihoodEngine, enumerate_moves, nj_tree, parse_model
    from phylorl.phylo.bootstrap import nj_bootstrap_supports
    from phylorl.phylo.parsimony import bit_planes, parsimony_tips
    from phylorl.phylo.parsimony_starts import parsimony_spr, stepwise_addition
    from phylorl.phylo.simulate import simulate_dataset
    from phylorl.phylo.spr import subtree_moves
    from phylorl.phylo.tree import Tree
    from phylorl.search.prepare import fit_model_string
    from phylorl.search.rounds import spr_round, subtree_order

    def timed(fn):
        started = time.perf_counter()
        value = fn()
        return value, round(time.perf_counter() - started, 4)

    model = parse_model("GTR{1.2,3.1,0.8,1.1,4.0}+F{0.3,0.2,0.2,0.3}+G4{0.5}")
    out = {}
    for n in sizes:
        alignment = simulate_dataset(n, sites, np.random.default_rng([seed, n]), model=model).alignment
        patterns = alignment.patterns()
        tips, weights = parsimony_tips(patterns.codes), np.asarray(patterns.weights, np.float64)
        (bits, classes), _ = timed(lambda: bit_planes(tips, weights))
        order = np.random.default_rng(seed).permutation(n).astype(np.int64)
        # compile outside timing
        stepwise_addition(bits[:8], *bit_planes(tips[:8], weights)[1], order[order < 8])
        (edges, _), t_add = timed(lambda: stepwise_addition(bits, *classes, order))
        tree = Tree.from_edges(edges.astype(np.int32), np.full(len(edges), 0.05), alignment.taxa)
        arrays = (tree.neighbors, tree.node_edges, tree.edges, tree.lengths)
        _, t_pspr = timed(lambda: parsimony_spr(*arrays, n, bits, *classes, 6, 1))
        pairs = subtree_order(tree)
        radius5, t_enum5 = timed(
            lambda: sum(len(subtree_moves(tree.neighbors, n, p, s, 1, 5, True)) for p, s in pairs)
        )
        every, t_enum_all = timed(lambda: len(enumerate_moves(tree)))
        nj, t_nj = timed(lambda: nj_tree(alignment))
        _, t_boot = timed(lambda: nj_bootstrap_supports(alignment, 100, seed))
        fitted, t_fit = timed(lambda: fit_model_string(alignment, "GTR+F+G4"))
        engine = LikelihoodEngine(alignment, fitted)
        loglik, t_branches = timed(
            lambda: engine.optimize_branch_lengths(tree, np.arange(tree.n_edges), rounds=3, tol=1e-3)
        )
        result, t_round = timed(lambda: spr_round(engine, tree, loglik, 5, branches=0))
        out[str(n)] = {
            "patterns": int(patterns.n_patterns),
            "enumerate_radius5_seconds": t_enum5,
            "moves_radius5": int(radius5),
            "enumerate_all_seconds": t_enum_all,
            "moves_all": int(every),
            "stepwise_addition_seconds": t_add,
            "parsimony_spr_round_seconds": t_pspr,
            "nj_seconds": t_nj,
            "nj_bootstrap100_seconds": t_boot,
            "model_fit_seconds": t_fit,
            "branch_passes3_seconds": t_branches,
            "fast_round_seconds": t_round,
            "fast_round_candidates": result.scored,
            "fast_round_us_per_candidate": round(t_round / max(1, result.scored) * 1e6, 2),
        }
        log(json.dumps({n: out[str(n)]}))
    return out


def band_of(n_taxa: int) -> str | None:
    for lo, hi in BANDS:
        if lo <= n_taxa <= hi:
            return f"{lo}-{hi}"
    return None


def alignments(args) -> list[tuple[Path, int, int]]:
    """``(path, taxa, sites)`` of the alignments asked for, smallest first, at most ``--limit-per-band`` per
    band."""
    rows = []
    for item in args.alignments:
        item = Path(item)
        table = item.parent / f"{item.name}.tsv" if item.is_dir() else None
        if table is not None and table.exists():
            for line in table.read_text().splitlines()[1:]:
                name, taxa, sites = line.split("\t")
                rows.append((item.parent / name, int(taxa), int(sites)))
        else:
            from phylorl.phylo import load_alignment

            files = sorted(item.glob("*.fasta")) if item.is_dir() else [item]
            for f in files:
                a = load_alignment(f)
                rows.append((f, a.n_taxa, a.n_sites))
    wanted = None if args.bands is None else set(args.bands.split(","))
    rows = [
        r
        for r in sorted(rows, key=lambda r: (r[1], r[2]))
        if band_of(r[1]) and (wanted is None or band_of(r[1]) in wanted)
    ]
    if args.limit_per_band:  # (sorted by taxa: each band's rows are together)
        by_band = groupby(rows, key=lambda r: band_of(r[1]))
        rows = [r for _, group in by_band for r in islice(group, args.limit_per_band)]
    return rows


def rescore(alignment, model: str, newick: str) -> tuple[float, object]:
    from phylorl.phylo import LikelihoodEngine, read_newick

    tree = read_newick(newick, alignment, resolve_polytomies=True)
    engine = LikelihoodEngine(alignment, model)
    return float(engine.optimize_branch_lengths(tree, rounds=20, tol=1e-4)), tree


def run_case(path: Path, args) -> dict:
    from phylorl.phylo import load_alignment, rf_distance
    from phylorl.search.prepare import fit_model_string

    alignment = load_alignment(path)
    model = fit_model_string(alignment)
    if args.side_by_side:
        # IQ-TREE's run in a thread (it waits on its process) while our search runs: both at once
        pool = ThreadPoolExecutor(1)
        iq_future = pool.submit(cached_iqtree, args.cache, path, model, IQTREE_SEED, args.threads, True)
    else:
        rerun = not (args.cached_iqtree or args.noise_only)
        iq, fresh = cached_iqtree(args.cache, path, model, IQTREE_SEED, args.threads, rerun=rerun)
    n = alignment.n_taxa
    head = {"file": path.name, "taxa": n, "sites": alignment.n_sites, "band": band_of(n)}
    if args.noise_only:
        iq_ll, iq_tree = rescore(alignment, model, iq["newick"])
        return {
            **head,
            "iqtree_loglik": round(iq_ll, 4),
            **noise(alignment, path, model, iq_ll, iq_tree, args),
        }
    started = time.perf_counter()
    config = json.dumps({**json.loads(args.config), "threads": args.threads})
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(path), "--seed", str(args.seed), "--config", config],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    ours_seconds = time.perf_counter() - started
    if args.side_by_side:
        iq, fresh = iq_future.result()
        pool.shutdown()
    if proc.returncode != 0:
        raise RuntimeError(f"our search failed on {path}: {proc.stderr[-2000:]}")
    ours = json.loads(proc.stdout.strip().splitlines()[-1])
    if ours["model"] != model:
        raise RuntimeError(f"the search fitted another model string on {path}: {ours['model']} != {model}")
    iq_ll, iq_tree = rescore(alignment, model, iq["newick"])
    our_ll, our_tree = rescore(alignment, model, ours["newick"])
    row = {
        **head,
        "iqtree_loglik": round(iq_ll, 4),
        "iqtree_reported_loglik": iq["reported_loglik"],
        "iqtree_seconds": round(iq["seconds"], 2),
        "iqtree_timed_now": bool(fresh),
        "loglik": round(our_ll, 4),
        "gap": round(our_ll - iq_ll, 4),
        "seconds": round(ours_seconds, 2),
        "time_ratio": round(ours_seconds / iq["seconds"], 3),
        "rf": rf_distance(our_tree, iq_tree),
        "prepare_seconds": round(ours["prepare_seconds"], 2),
        "rounds": ours["rounds"],
        "moves": ours["moves"],
        "peak_rss_bytes": ours["peak_rss_bytes"],
        "worker_peak_rss_bytes": ours["worker_peak_rss_bytes"],
        "dropped": ours["dropped"],
        "threads": args.threads,
        "side_by_side": bool(args.side_by_side),
    }
    if args.noise:
        row.update(noise(alignment, path, model, iq_ll, iq_tree, args))
    return row


def noise(alignment, path: Path, model: str, iq_ll: float, iq_tree, args) -> dict:
    """IQ-TREE's seed-2 run against its seed-1 tree (log-likelihood ``iq_ll``): the noise floor."""
    from phylorl.phylo import rf_distance

    iq2, _ = cached_iqtree(args.cache, path, model, IQTREE_NOISE_SEED, args.threads, rerun=False)
    iq2_ll, iq2_tree = rescore(alignment, model, iq2["newick"])
    return {
        "iqtree2_gap": round(iq2_ll - iq_ll, 4),
        "iqtree2_seconds": round(iq2["seconds"], 2),
        "iqtree2_rf": rf_distance(iq2_tree, iq_tree),
    }


def summarise(rows: list[dict]) -> dict:
    out = {}
    for lo, hi in BANDS:
        band = [r for r in rows if r["band"] == f"{lo}-{hi}"]
        if not band:
            continue
        s = {"alignments": len(band)}
        if all("gap" in r for r in band):
            s["within_0.1"] = round(sum(r["gap"] >= -TOLERANCE for r in band) / len(band), 3)
            s["mean_gap"] = round(statistics.mean(r["gap"] for r in band), 3)
            s["median_gap"] = round(statistics.median(r["gap"] for r in band), 3)
            s["time_ratio_total"] = round(
                sum(r["seconds"] for r in band) / sum(r["iqtree_seconds"] for r in band), 3
            )
            s["time_ratio_median"] = round(statistics.median(r["time_ratio"] for r in band), 3)
            s["mean_rf"] = round(statistics.mean(r["rf"] for r in band), 2)
            s["peak_rss_bytes_max"] = max(r["peak_rss_bytes"] for r in band)
        if all("iqtree2_gap" in r for r in band):
            s["iqtree2_within_0.1"] = round(sum(r["iqtree2_gap"] >= -TOLERANCE for r in band) / len(band), 3)
            s["iqtree2_mean_gap"] = round(statistics.mean(r["iqtree2_gap"] for r in band), 3)
        out[f"{lo}-{hi}"] = s
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--alignments", nargs="+", default=[str(VALID)])
    p.add_argument("--bands", help="comma-separated bands to run, e.g. 30-99,100-199 (default: all)")
    p.add_argument("--limit-per-band", type=int, default=0)
    add_flags(
        p,
        {
            "--noise": f"also IQ-TREE with seed {IQTREE_NOISE_SEED}, on --threads (cached runs are reused)",
            "--noise-only": "only IQ-TREE's seed 2 against its (cached) seed 1: the noise floor, no search "
            "of ours",
            "--cached-iqtree": "use cached IQ-TREE times instead of re-timing",
            "--side-by-side": "IQ-TREE (timed afresh) and our search at the same time, each on its own cores",
        },
    )
    p.add_argument("--cache", default="/tmp/iqtree-cache")
    p.add_argument("--config", default="{}", help="SearchConfig fields as JSON")
    p.add_argument(
        "--seed", type=int, default=1, help=f"our search's seed (IQ-TREE always runs with seed {IQTREE_SEED})"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="IQ-TREE's -nt and our search's threads (perturb-and-climb processes)",
    )
    p.add_argument(
        "--costs", help="instead of searching: per-state costs at these taxa counts, e.g. 100,300,1000"
    )
    p.add_argument("--sites", type=int, default=1000, help="sites of the --costs alignments")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side_by_side and (args.cached_iqtree or args.noise_only):
        p.error("--side-by-side times IQ-TREE afresh: not with --cached-iqtree or --noise-only")
    if args.child:
        child(args.child, args.seed, args.config)
        return
    if args.costs:
        info = {"bench": "search_costs", "machine": machine(), "sites": args.sites}  # machine: load before
        emit({**info, "sizes": costs([int(n) for n in args.costs.split(",")], args.sites, args.seed)})
        return
    rows = []
    for path, taxa, sites in alignments(args):
        row = run_case(path, args)
        rows.append(row)
        log(json.dumps(row))
    emit(
        {
            "bench": "search_large",
            "machine": machine(),
            "config": json.loads(args.config),
            "seed": None if args.noise_only else args.seed,
            "iqtree_seed": IQTREE_SEED,
            "threads": args.threads,
            "rows": rows,
            "bands": summarise(rows),
        }
    )


if __name__ == "__main__":
    main()
