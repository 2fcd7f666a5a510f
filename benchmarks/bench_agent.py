"""Choosing a move with a trained agent: the rich observation's features plus the network's greedy
choice, one CPU thread; prints one JSON line.

For one real alignment of each size (7, 12, 15, 20 taxa from ``../shared/data/real/valid``) it walks
a 2n-step agent episode from a random start and times, per state, building the features (parsimony
change of every move, geometry, split supports; the SPR enumeration is the environment's), the
network's part (collate + both Q networks + argmax) and the whole choice (both). Figures are
medians over the states, in ms.

The network's part includes the tabu check (the compiled topology key of the chosen move's tree against
the trees visited in the episode), as ``phylorl search``/``eval`` run the agent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import torch  # noqa: E402
from common import REPO, emit, machine  # noqa: E402

from phylorl.agent.checkpoints import DEFAULT_CHECKPOINT  # noqa: E402
from phylorl.agent.policy import DEFAULT_TABU, AgentPolicy  # noqa: E402
from phylorl.env.config import EnvConfig  # noqa: E402
from phylorl.env.prepare import PreparationCache  # noqa: E402
from phylorl.env.tree_env import EnvAlignment, TreeEnv  # noqa: E402
from phylorl.phylo import load_alignment  # noqa: E402

VALID = REPO.parent / "shared" / "data" / "real" / "valid"
ROUNDS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="default: the shipped agent")
    parser.add_argument("--tabu", type=int, default=DEFAULT_TABU, help="0: plain greedy")
    args = parser.parse_args()
    torch.set_num_threads(1)
    policy = AgentPolicy.from_checkpoint(args.checkpoint, tabu=args.tabu)
    cache = PreparationCache(REPO / ".cache" / "bench-prepared")
    by_size = {}
    for path in sorted(VALID.iterdir()):
        alignment = load_alignment(path)
        by_size.setdefault(alignment.n_taxa, (path, alignment))
    result = {
        "benchmark": "agent_choose_move",
        "checkpoint": str(args.checkpoint),
        "network": policy.nets[0].cfg.__dict__,
        "machine": machine(),
        "torch_threads": 1,
        "tabu": policy.tabu,
    }
    for n in (7, 12, 15, 20):
        if n not in by_size:
            continue
        path, alignment = by_size[n]
        entry = EnvAlignment.build(alignment, cache.get(alignment), path.name)
        features, network, choose = [], [], []
        for round_ in range(ROUNDS):
            env = TreeEnv([entry], EnvConfig(start="random", features=policy.features), seed=round_)
            env.reset(0)
            policy.choose(env)  # warm-up
            for _ in range(2 * n):
                env._last = None  # build the features anew, as after a move
                t0 = time.perf_counter()
                env.observation(policy.features)
                t1 = time.perf_counter()
                action = policy.choose(env)  # reuses that observation: the network's part
                t2 = time.perf_counter()
                features.append(t1 - t0)
                network.append(t2 - t1)
                choose.append(t2 - t0)
                env.step(action)
        result[f"n{n}_moves"] = len(env.moves)
        for part, times in (("features", features), ("network", network), ("choose", choose)):
            result[f"n{n}_{part}_ms"] = round(1e3 * statistics.median(times), 3)
    emit(result)


if __name__ == "__main__":
    main()
