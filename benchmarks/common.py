"""Shared helpers for the benchmark scripts: machine description, median timing and realistic transitions."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DS_DIR = REPO.parent / "shared" / "data" / "ds"


def cpu_model() -> str:
    """The CPU's model name with its family and model numbers (a virtual machine often names only the vendor's
    line, as ``AMD EPYC``, while its generations differ in speed: family 25 model 1 is Zen 3, model 17 Zen
    4)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if not key.strip():
                    break
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


def machine() -> dict:
    """What the figures were measured on (CPU, cores, load at start; GPU when torch sees one)."""
    info = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.machine()}",
    }
    try:
        import torch

        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def median_seconds(fn, repeats: int = 21, calls: int = 1, warmup: int = 1) -> float:
    """Median over ``repeats`` of the mean time of ``calls`` calls of ``fn``."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def emit(result: dict) -> None:
    print(json.dumps(result))


def episode_transitions(count: int, n_taxa: int, seed: int) -> tuple[list, str]:
    """Transitions of random walks of the real environment (rich observation, horizon 20) on an alignment
    simulated on a random tree (1,000 sites): what actors insert."""
    import numpy as np

    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import prepare_alignment
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.phylo.simulate import simulate_dataset
    from phylorl.types import Transition

    rng = np.random.default_rng(seed)
    alignment = simulate_dataset(n_taxa, 1000, rng).alignment
    env = TreeEnv(
        [EnvAlignment.build(alignment, prepare_alignment(alignment, "GTR+F+G4"), "sim")],
        EnvConfig(),
        seed=seed,
    )
    out = []
    obs, _ = env.reset()
    while len(out) < count:
        action = int(rng.integers(obs.n_actions))
        nxt, reward, terminal, truncated, _ = env.step(action)
        out.append(Transition(obs, action, reward, nxt, terminal, truncated, 0.99, policy_version=len(out)))
        obs = env.reset()[0] if truncated else nxt
    return out, "random walks of TreeEnv (rich observation) on a simulated alignment"
