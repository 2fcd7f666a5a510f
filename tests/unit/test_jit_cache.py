"""Compiled kernels are cached by a digest of the whole source, so a change in a called module is never run
stale."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from numba.core import config

from phylorl.jit_cache import ENV, source_digest, use_source_keyed_cache

REPO = Path(__file__).resolve().parents[2]


def test_the_digest_follows_every_module_that_uses_numba_and_no_other(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("from numba import njit\nx = 1\n")
    (tmp_path / "sub" / "b.py").write_text("import numba\ny = 2\n")
    (tmp_path / "cli.py").write_text("print('hello')\n")
    first = source_digest(tmp_path)
    assert source_digest(tmp_path) == first
    (tmp_path / "cli.py").write_text("print('hello, world')\n")  # no kernel: the compiled code stays
    assert source_digest(tmp_path) == first
    (tmp_path / "sub" / "b.py").write_text("import numba\ny = 3\n")
    second = source_digest(tmp_path)
    (tmp_path / "sub" / "b.py").rename(tmp_path / "sub" / "c.py")  # same contents, another module
    assert len({first, second, source_digest(tmp_path)}) == 3


def test_a_cache_directory_the_user_chose_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, str(tmp_path / "mine"))
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "mine"))
    assert use_source_keyed_cache(base=tmp_path) is None
    assert os.environ[ENV] == str(tmp_path / "mine") and str(tmp_path / "mine") == config.CACHE_DIR


def test_without_one_the_cache_is_named_by_the_source(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(config, "CACHE_DIR", "")
    path = use_source_keyed_cache(base=tmp_path)
    assert path == tmp_path / source_digest()
    assert os.environ[ENV] == str(path) and str(path) == config.CACHE_DIR  # for this process and its children


def test_the_services_package_sets_it_before_any_kernel_is_imported(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != ENV} | {"XDG_CACHE_HOME": str(tmp_path)}
    code = (
        "import services, os, sys; print(os.environ['NUMBA_CACHE_DIR']); "
        "print('phylorl.env' in str(sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    where, kernels_loaded = out.stdout.split()
    assert where == str(tmp_path / "phylorl" / "numba" / source_digest())
    assert kernels_loaded == "False"


def _package(root: Path, inner_value: int) -> None:
    """A kernel in one module calling a kernel in another, both cached (the record pass's shape)."""
    (root / "pkg").mkdir(exist_ok=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "outer.py").write_text(
        textwrap.dedent("""
        from numba import njit
        from pkg.inner import inner

        @njit(cache=True)
        def outer():
            return inner() * 10
    """)
    )
    (root / "pkg" / "inner.py").write_text(
        f"from numba import njit\n\n@njit(cache=True)\ndef inner():\n    return {inner_value}\n"
    )


def _outer(root: Path, keyed: bool) -> int:
    setup = (
        (
            f"from phylorl.jit_cache import use_source_keyed_cache; "
            f"use_source_keyed_cache(base={str(root / 'cache')!r}, root={str(root / 'pkg')!r}); "
        )
        if keyed
        else ""
    )
    env = {k: v for k, v in os.environ.items() if k != ENV} | {"PYTHONPATH": f"{root}{os.pathsep}{REPO}"}
    out = subprocess.run(
        [sys.executable, "-c", setup + "from pkg.outer import outer; print(outer())"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


def test_a_changed_callee_in_another_module_is_recompiled(tmp_path):
    for keyed, root in ((False, tmp_path / "plain"), (True, tmp_path / "keyed")):
        root.mkdir()
        _package(root, 1)
        assert _outer(root, keyed) == 10
        _package(root, 2)  # only the callee's module changes
        if keyed:
            assert _outer(root, keyed) == 20
        else:  # numba's own cache keeps the caller's old code: the failure the keyed cache exists for
            assert _outer(root, keyed) == 10, "numba now notices changed callees: phylorl/jit_cache.py may go"
