"""The package boundaries the design fixes, checked on the source: the library never imports the
services, and no file of either grows past a few hundred lines (generated protobuf code aside)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _python_files(package: str) -> list[Path]:
    return [p for p in (REPO / package).rglob("*.py") if "/v1/" not in p.as_posix()]


def test_the_library_never_imports_the_services():
    offenders = []
    for path in _python_files("phylorl"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            offenders += [
                f"{path.relative_to(REPO)}: {name}"
                for name in names
                if name == "services" or name.startswith("services.")
            ]
    assert not offenders, offenders


def test_shared_types_load_without_torch_or_numba_and_the_replay_service_without_torch():
    import subprocess
    import sys

    def loaded(modules: str) -> str:
        code = (
            f"import sys, {modules}; "
            "print(sorted(m for m in ('torch', 'numba', 'torch_geometric') if m in sys.modules))"
        )
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
        ).stdout.strip()

    assert loaded("phylorl.types, phylorl.telemetry") == "[]"
    assert loaded("phylorl.replay, services.replay.server, services.replay.__main__") == "['numba']"


MAX_LINES = 500
"""A few hundred lines in ``ruff format``'s layout, which gives a signature or call that does not fit on one
line a line per argument."""


def test_files_stay_small():
    long = {
        str(p.relative_to(REPO)): n
        for package in ("phylorl", "services")
        for p in _python_files(package)
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_the_implementations_still_meet_the_interfaces():
    from phylorl import interfaces
    from services.learner.inference import BatchingInference
    from services.replay.client import ReplayClient, SampledRecords
    from services.replay.store import RedisStore

    for implementation, protocol in (
        (ReplayClient, interfaces.ReplaySource),
        (BatchingInference, interfaces.WeightsSink),
        (RedisStore, interfaces.RecordStore),
    ):
        missing = [
            name for name in dir(protocol) if not name.startswith("_") and not hasattr(implementation, name)
        ]
        assert not missing, f"{implementation.__name__} lacks {missing} of {protocol.__name__}"
    assert {"keys", "weights", "records"} <= set(SampledRecords.__dataclass_fields__)


def _imports(path: Path) -> set[str]:
    """The phylorl/services modules ``path`` imports (anywhere in it, function bodies included)."""
    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the importing module's package
                base = (
                    module.split(".")[: -node.level]
                    if path.name != "__init__.py"
                    else module.split(".")[: len(module.split(".")) - node.level + 1]
                )
                names.add(".".join(base + ([node.module] if node.module else [])))
            else:
                names.add(node.module or "")
    return {n for n in names if n.split(".")[0] in ("phylorl", "services")}


def _package(module: str) -> str:
    """A module's package at the level the boundaries are drawn: ``phylorl.records``, ``services.replay``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (REPO / "/".join(parts)).is_dir() else parts[0]


def test_no_import_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for top in ("phylorl", "services"):
        for path in _python_files(top):
            own = _package(".".join(path.relative_to(REPO).with_suffix("").parts))
            graph.setdefault(own, set()).update(p for p in map(_package, _imports(path)) if p != own)
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in trail:
                cycles.append(trail[trail.index(nxt) :] + [nxt])
            elif len(trail) < len(graph):
                visit(nxt, trail + [nxt])

    for start in sorted(graph):
        visit(start, [start])
    assert not cycles, f"import cycles between packages: {sorted({' -> '.join(c) for c in cycles})[:5]}"


def test_the_environment_knows_no_wire_format():
    offenders = [
        f"{p.relative_to(REPO)}: {m}"
        for p in _python_files("phylorl/env")
        for m in _imports(p)
        if m.startswith(("phylorl.wire", "phylorl.records"))
    ]
    assert not offenders, offenders


def test_the_transition_path_in_the_architecture_names_real_files_each_package_once():
    import re

    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## One transition's path", 1)[1].split("\n## ", 1)[0]
    files = re.findall(r"^\d+\. `([\w/.]+\.py)`", section, flags=re.MULTILINE)
    assert 10 <= len(files) <= 30, files
    assert not [f for f in files if not (REPO / f).is_file()], [f for f in files if not (REPO / f).is_file()]
    packages = [str(Path(f).parent) for f in files]
    entered = [p for i, p in enumerate(packages) if i == 0 or packages[i - 1] != p]
    assert len(entered) == len(set(entered)), f"a package entered twice: {entered}"


def test_every_repository_path_the_docs_name_exists():
    import re

    tops = tuple(f"{p.name}/" for p in REPO.iterdir() if p.is_dir() and not p.name.startswith("."))
    missing = []
    for doc in [REPO / "README.md", REPO / "models" / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for name in set(re.findall(r"`([\w./-]+\.(?:py|sh|md|json|yml|toml|proto|pt))`", doc.read_text())):
            if name.startswith(tops):
                found = (REPO / name).exists()
            elif doc.name == "benchmarks.md" and "/" not in name and name.endswith(".py"):
                found = (REPO / "benchmarks" / name).exists() or (REPO / "scripts" / name).exists()
            else:
                continue
            if not found:
                missing.append(f"{doc.relative_to(REPO)}: {name}")
    assert not missing, missing
