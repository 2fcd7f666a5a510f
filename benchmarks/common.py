"""Shared helpers for the benchmark scripts: machine description and median timing."""

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
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
