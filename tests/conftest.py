"""Fixtures shared by every test: the benchmark data sets and the real external programs.

External programs (``iqtree2``, ``redis-server``, ``prometheus``) are real, never mocked. Outside CI a
missing program skips the tests that need it; under CI (``CI=true``) it fails them, so a broken
install can never pass as green.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from phylorl.jit_cache import use_source_keyed_cache

use_source_keyed_cache()  # before any test module imports a compiled kernel (phylorl/jit_cache.py says why)

REPO = Path(__file__).resolve().parents[1]
DS_DIR = REPO.parent / "shared" / "data" / "ds"
REAL_DIR = REPO.parent / "shared" / "data" / "real"


def require_program(name: str) -> str:
    """Path of program ``name``; skip (locally) or fail (in CI) when it is not installed."""
    path = shutil.which(name)
    if path is None:
        _missing(f"{name} is not installed (scripts/install.sh installs it)")
    return path


def _missing(message: str) -> None:
    """Something a test needs is absent: fail in CI, skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def ds_dir() -> Path:
    if not DS_DIR.exists():
        _missing(f"benchmark data sets not found at {DS_DIR}")
    return DS_DIR


@pytest.fixture(scope="session")
def real_dir() -> Path:
    """The real alignments (``train/``, ``valid/``)."""
    if not REAL_DIR.exists():
        _missing(f"real alignments not found at {REAL_DIR}")
    return REAL_DIR


@pytest.fixture(scope="session")
def ds_reference(ds_dir):
    """``(dataset, model_tag) -> dict`` with the reference JSON plus ``alignment`` and ``tree`` paths."""

    def get(dataset: str, tag: str) -> dict:
        ref = json.loads((ds_dir / "reference" / f"{dataset}.{tag}.json").read_text())
        ref["alignment"] = ds_dir / f"{dataset}.fasta"
        ref["tree"] = ds_dir / "reference" / f"{dataset}.{tag}.treefile"
        return ref

    return get


@dataclass(frozen=True)
class IqtreeRun:
    """One ``iqtree2`` evaluation of a fixed tree: its standard output and its ``.iqtree`` report."""

    stdout: str
    report: str

    @property
    def loglik(self) -> float:
        return float(re.search(r"Log-likelihood of the tree: (\S+)", self.report).group(1))


@pytest.fixture(scope="session")
def iqtree_fixed(tmp_path_factory):
    """The one IQ-TREE runner of the tests: ``run(alignment, newick, model, *extra)`` evaluates ``newick``
    with its branch lengths fixed (``iqtree2 -s ALN -te TREE -blfix -m MODEL -nt 1 [extra]``) and returns an
    :class:`IqtreeRun`. A missing ``iqtree2`` skips locally and fails under CI."""
    exe = require_program("iqtree2")
    work = tmp_path_factory.mktemp("iqtree-fixed")
    counter = iter(range(1_000_000))

    def run(alignment: Path, newick: str, model: str, *extra: str) -> IqtreeRun:
        i = next(counter)
        tree = work / f"t{i}.nwk"
        tree.write_text(newick.strip() + "\n")
        prefix = work / f"run{i}"
        cmd = [
            exe,
            "-s",
            str(alignment),
            "-te",
            str(tree),
            "-blfix",
            "-m",
            model,
            "-nt",
            "1",
            "-redo",
            "-pre",
            str(prefix),
            *(extra or ("-quiet",)),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (
            f"{' '.join(cmd)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        )
        return IqtreeRun(result.stdout, Path(f"{prefix}.iqtree").read_text())

    return run


@pytest.fixture(scope="session")
def need():
    """``need("redis-server")``: the program's path; skip locally / fail in CI when it is missing."""
    return require_program


@pytest.fixture(scope="session")
def need_module():
    """``need_module("triton")``: the imported package; skip locally / fail in CI when it is missing."""

    def load(name: str):
        try:
            return importlib.import_module(name)
        except ImportError:
            _missing(f"Python package {name} is not installed (pip install -e '.[dev]' installs it)")

    return load


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``pytest -n N --dist loadgroup`` (``.ci/run``) each test file is one unit of work, so its module
    fixtures (servers, trained agents) are built once; files that share a resource name one ``xdist_group`` of
    their own (the Docker modules: "docker"). Runs before pytest-xdist reads the groups."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
