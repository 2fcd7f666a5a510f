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
            offenders += [f"{path.relative_to(REPO)}: {name}" for name in names
                          if name == "services" or name.startswith("services.")]
    assert not offenders, offenders


def test_shared_types_load_without_torch_or_numba_and_the_replay_service_without_torch():
    import subprocess
    import sys

    def loaded(modules: str) -> str:
        code = (f"import sys, {modules}; "
                "print(sorted(m for m in ('torch', 'numba', 'torch_geometric') if m in sys.modules))")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                              check=True).stdout.strip()

    assert loaded("phylorl.types, phylorl.telemetry") == "[]"
    assert loaded("phylorl.replay, services.replay.server, services.replay.__main__") == "['numba']"


def test_files_stay_small():
    long = {str(p.relative_to(REPO)): n for package in ("phylorl", "services") for p in _python_files(package)
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, f"files over 400 lines: {long}"


def test_the_implementations_still_meet_the_interfaces():
    from phylorl import interfaces
    from services.learner.inference import BatchingInference
    from services.replay.client import ReplayClient, SampledRecords
    from services.replay.store import RedisStore

    for implementation, protocol in ((ReplayClient, interfaces.ReplaySource), (BatchingInference, interfaces.WeightsSink),
                                     (RedisStore, interfaces.RecordStore)):
        missing = [name for name in dir(protocol) if not name.startswith("_") and not hasattr(implementation, name)]
        assert not missing, f"{implementation.__name__} lacks {missing} of {protocol.__name__}"
    assert {"keys", "weights", "records"} <= set(SampledRecords.__dataclass_fields__)
