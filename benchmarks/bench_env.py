"""Environment step speed, split into its parts; prints one JSON line.

A TreeEnv step = apply the SPR move + optimise the branches around the regraft point (2 Newton
passes over the 3 edges at p) + compute the reward + build the next observation. In the split into
parts the observation is the basic one (enumerate the moves, copy the tree's arrays:
:func:`phylorl.env.observation.observe`; the network's features are made from it later, by
:mod:`phylorl.records`); ``env_step_ms`` is the real ``TreeEnv.step`` with its default (rich)
observation, which adds each move's parsimony change and the split supports. Measured on DS1 (27 taxa,
GTR+F+G4 fixed to IQ-TREE's estimates) and on a simulated 20-taxon, 1000-site alignment, with random
moves from random start trees, one core. Figures are medians over repeated blocks of steps
(milliseconds per step). ``sim20_vec_env``: a VecTreeEnv of 4 environments stepping on the same
alignment (each environment has its own engine state); ``sim20_vec_env_rich`` the same with the rich
observation the actors send (parsimony changes, split supports); ``parsimony_deltas`` the Fitch length
change of every move of one tree (the rich observation's costliest part).

Usage: python benchmarks/bench_env.py  (needs ../shared/data/ds for DS1)
"""

from __future__ import annotations

import json
import os
import statistics
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from common import DS_DIR, emit, machine, median_seconds  # noqa: E402

from phylorl.env.config import EnvConfig  # noqa: E402
from phylorl.env.observation import observe  # noqa: E402
from phylorl.env.prepare import PreparedAlignment  # noqa: E402
from phylorl.env.tree_env import EnvAlignment, TreeEnv  # noqa: E402
from phylorl.phylo import apply_spr, edges_near, enumerate_moves, load_alignment, nj_tree, write_newick  # noqa: E402
from phylorl.phylo.simulate import simulate_dataset  # noqa: E402

BLOCKS = 15
STEPS_PER_BLOCK = 40


def prepared_for(alignment, model: str) -> PreparedAlignment:
    from phylorl.phylo import LikelihoodEngine, parse_model

    tree = nj_tree(alignment)
    loglik = LikelihoodEngine(alignment, parse_model(model)).optimize_branch_lengths(tree)
    return PreparedAlignment(
        alignment.content_hash(), model, write_newick(tree), loglik, alignment.patterns().n_patterns
    )


def measure(entry: EnvAlignment, seed: int) -> dict:
    env = TreeEnv([entry], EnvConfig(horizon=10**9), seed=seed)
    env.reset()
    rng = np.random.default_rng(seed)
    engine = entry.engine
    parts = {"apply_move": [], "branch_opt": [], "reward": [], "observation": [], "step_total": []}
    for _ in range(BLOCKS + 1):
        acc = dict.fromkeys(parts, 0.0)
        for _ in range(STEPS_PER_BLOCK):
            move = env.moves[rng.integers(len(env.moves))]
            t0 = time.perf_counter()
            apply_spr(env.tree, move)
            t1 = time.perf_counter()
            new = engine.optimize_branch_lengths(
                env.tree, edges_near(env.tree, [int(move[0])], 1), rounds=2, tol=1e-3, newton_tol=1e-4
            )
            t2 = time.perf_counter()
            reward = (new - env.loglik) / abs(entry.prepared.nj_loglik) * env.config.reward_scale
            env.loglik = new
            t3 = time.perf_counter()
            moves = enumerate_moves(env.tree)
            observe(env.tree, moves, "basic")
            env._moves = moves
            t4 = time.perf_counter()
            for key, value in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                acc[key] += value
            assert np.isfinite(reward)
        for key in parts:
            parts[key].append(acc[key] / STEPS_PER_BLOCK * 1e3)
    out = {f"{k}_ms": round(statistics.median(v[1:]), 4) for k, v in parts.items()}  # block 0 = warm-up
    # the real TreeEnv.step, end to end
    step = lambda: env.step(int(rng.integers(len(env.moves))))  # noqa: E731
    out["env_step_ms"] = round(median_seconds(step, BLOCKS, STEPS_PER_BLOCK, warmup=0) * 1e3, 4)
    out["env_steps_per_s"] = round(1e3 / out["env_step_ms"], 1)
    out["n_moves"] = int(len(env.moves))
    return out


def measure_vec(entry: EnvAlignment, n_envs: int, seed: int, features: str = "basic") -> dict:
    """``VecTreeEnv`` of ``n_envs`` environments on one alignment, random moves: ms per environment step
    (median over blocks). The environments interleave on the same alignment, the case where a shared
    engine would recompute every partial at every step."""
    from phylorl.env.vec_env import VecTreeEnv

    vec = VecTreeEnv([entry], n_envs, EnvConfig(start="random", horizon=10**9, features=features), seed=seed)
    obs = vec.reset()
    rng = np.random.default_rng(seed)

    def step() -> None:
        nonlocal obs
        obs = vec.step([int(rng.integers(o.n_actions)) for o in obs]).obs

    ms = median_seconds(step, BLOCKS, STEPS_PER_BLOCK, warmup=0) / n_envs * 1e3
    return {"n_envs": n_envs, "features": features, "ms_per_env_step": round(ms, 4)}


def parsimony_ms(alignment, seed: int) -> dict:
    """The rich features' Fitch length change of every SPR move of a random tree (``spr_parsimony_deltas``):
    ms per tree, median of blocks."""
    from phylorl.phylo import random_tree
    from phylorl.phylo.parsimony import parsimony_tips, spr_parsimony_deltas

    patterns = alignment.patterns()
    tips, weights = parsimony_tips(patterns.codes), np.asarray(patterns.weights, np.float64)
    tree = random_tree(alignment.taxa, np.random.default_rng(seed))
    moves = enumerate_moves(tree)
    ms = (
        median_seconds(lambda: spr_parsimony_deltas(tree, moves, tips, weights), BLOCKS, STEPS_PER_BLOCK)
        * 1e3
    )
    return {"patterns": int(tips.shape[1]), "moves": int(len(moves)), "ms": round(ms, 4)}


def main() -> None:
    result = {"bench": "env", "machine": machine(), "steps_per_block": STEPS_PER_BLOCK, "blocks": BLOCKS}
    ds1 = load_alignment(DS_DIR / "DS1.fasta")
    model = json.loads((DS_DIR / "reference" / "DS1.GTR_G4.json").read_text())["model"]
    result["ds1_gtr_f_g4"] = measure(EnvAlignment.build(ds1, prepared_for(ds1, model)), seed=0)
    sim = simulate_dataset(20, 1000, np.random.default_rng(7))
    sim_entry = EnvAlignment.build(sim.alignment, prepared_for(sim.alignment, sim.model))
    result["sim20_gtr_g"] = measure(sim_entry, seed=1)
    result["sim20_vec_env"] = measure_vec(sim_entry, n_envs=4, seed=2)
    result["sim20_vec_env_rich"] = measure_vec(sim_entry, n_envs=4, seed=2, features="rich")
    result["parsimony_deltas"] = {
        "sim20": parsimony_ms(sim.alignment, seed=3),
        "ds1": parsimony_ms(ds1, seed=3),
    }
    emit(result)


if __name__ == "__main__":
    main()
