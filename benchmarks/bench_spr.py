"""Time SPR move enumeration (the environment runs it at every step); prints one JSON line.

Figures are medians over repeats, in microseconds per call, on random trees of 20 and 27 leaves (27 = DS1).
Also times move_metadata and copy + apply_spr, and the search's enumeration at 300 leaves (the moves of every
subtree within radius 5, one ``subtree_moves`` call per subtree). Usage: python benchmarks/bench_spr.py
"""

from __future__ import annotations

import platform

import numpy as np
from common import cpu_model, emit, median_seconds

from phylorl.phylo.spr import apply_spr, enumerate_moves, move_metadata, subtree_moves
from phylorl.phylo.starts import random_tree

REPEATS = 21
CALLS_PER_REPEAT = 200


def median_us(fn) -> float:
    return round(median_seconds(fn, REPEATS, CALLS_PER_REPEAT) * 1e6, 2)  # after one call (compile, warm up)


def main() -> None:
    rng = np.random.default_rng(0)
    result = {
        "bench": "spr",
        "machine": f"{cpu_model()} ({platform.system()} {platform.machine()}, "
        f"python {platform.python_version()})",
        "repeats": REPEATS,
        "calls_per_repeat": CALLS_PER_REPEAT,
    }
    for n in (20, 27):
        tree = random_tree([f"t{i}" for i in range(n)], rng)
        moves = enumerate_moves(tree)
        middle = moves[len(moves) // 2]
        result[f"n{n}_moves"] = int(len(moves))
        result[f"n{n}_enumerate_moves_us"] = median_us(lambda: enumerate_moves(tree))
        result[f"n{n}_enumerate_moves_radius3_us"] = median_us(lambda: enumerate_moves(tree, radius=3))
        result[f"n{n}_move_metadata_us"] = median_us(lambda: move_metadata(tree, moves))
        result[f"n{n}_copy_apply_spr_us"] = median_us(lambda: apply_spr(tree.copy(), middle))
    tree = random_tree([f"t{i}" for i in range(300)], rng)
    pairs = [(p, int(s)) for p in range(300, tree.n_nodes) for s in tree.neighbors[p]]
    result["n300_subtree_moves_radius5_us"] = median_us(
        lambda: [subtree_moves(tree.neighbors, 300, p, s, 1, 5, True) for p, s in pairs]
    )
    emit(result)


if __name__ == "__main__":
    main()
