"""Shared helpers for the benchmark scripts: machine description, median timing and realistic transitions."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DS_DIR = REPO.parent / "shared" / "data" / "ds"
# this checkout's phylorl and services, as child_env gives the processes started
sys.path.insert(0, str(REPO))


def cpu_model(numbers: bool = True) -> str:
    """The CPU's model name with (``numbers``) its family and model numbers (a virtual machine often names
    only the vendor's line, as ``AMD EPYC``, while its generations differ in speed: family 25 model 1 is Zen
    3, model 17 Zen 4)."""
    fields = {}
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if not key.strip():
                break
            fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine()
    if numbers and "cpu family" in fields and "model" in fields:
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
    with contextlib.suppress(ImportError):
        import torch

        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
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


def seconds(fn, device=None) -> float:
    """Wall seconds of one call of ``fn``, a CUDA ``device`` synchronised before and after it."""
    sync = lambda: None  # noqa: E731
    if device is not None and str(device).startswith("cuda"):
        import torch

        sync = torch.cuda.synchronize
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def emit(result: dict) -> None:
    print(json.dumps(result))


def log(message: str) -> None:
    """A progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


def add_flags(parser, helps: dict[str, str]) -> None:
    """On/off options (``store_true``) of ``parser``: ``{"--name": help}``."""
    for name, text in helps.items():
        parser.add_argument(name, action="store_true", help=text)


def child_env() -> dict:
    """This process's environment with the repository first on ``PYTHONPATH``: for the processes a benchmark
    starts."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }


def start_train(options: list[str], config: Path, run_dir: Path) -> subprocess.Popen:
    """``phylorl train OPTIONS --config CONFIG --run-dir RUN_DIR`` as a child process (stderr kept, to say why
    it failed)."""
    command = [sys.executable, "-m", "phylorl.cli", "train", *options, "--config", str(config)]
    command += ["--run-dir", str(run_dir)]
    return subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env()
    )


def run_ports(train: subprocess.Popen, run_dir: Path, timeout_s: float, ready=lambda: True) -> dict:
    """The ``ports.json`` of a :func:`start_train` run once it is written and ``ready()``; raises when the run
    exits or ``timeout_s`` passes first."""
    started = time.monotonic()
    while not (run_dir / "ports.json").exists() or not ready():
        if train.poll() is not None or time.monotonic() - started > timeout_s:
            raise RuntimeError(f"the run did not start: {train.stderr.read()[-2000:]}")
        time.sleep(1)
    return json.loads((run_dir / "ports.json").read_text())


def stop_train(train: subprocess.Popen) -> None:
    """Stop a :func:`start_train` run as a user does (Ctrl-C: SIGINT) and wait for it."""
    if train.poll() is None:
        train.send_signal(signal.SIGINT)
    train.communicate(timeout=300)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def service_patterns(ports: dict) -> dict[str, str]:
    """``pgrep -f`` patterns of a ``phylorl train`` run's processes, by service, from its ``ports.json``."""
    return {
        "redis": f"redis-server .*:{ports['redis']}",
        "replay": f"services.replay .*--port {ports['replay']['grpc']}( |$)",
        "learner": f"services.learner .*--port {ports['learner']['grpc']}( |$)",
        **{
            f"actor-{i}": f"services.actor .*--metrics-port {port}( |$)"
            for i, port in enumerate(ports["actors"])
        },
    }


def pid_of(pattern: str) -> int | None:
    """The first process whose command line matches ``pattern`` (``pgrep -f``)."""
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


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
    entry = EnvAlignment.build(alignment, prepare_alignment(alignment, "GTR+F+G4"), "sim")
    env = TreeEnv([entry], EnvConfig(), seed=seed)
    out = []
    obs, _ = env.reset()
    while len(out) < count:
        action = int(rng.integers(obs.n_actions))
        nxt, reward, terminal, truncated, _ = env.step(action)
        out.append(Transition(obs, action, reward, nxt, terminal, truncated, 0.99, policy_version=len(out)))
        obs = env.reset()[0] if truncated else nxt
    return out, "random walks of TreeEnv (rich observation) on a simulated alignment"
