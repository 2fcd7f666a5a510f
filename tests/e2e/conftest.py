"""Fixtures of the Docker end-to-end tests (compose and swarm): the ``docker compose`` command, the image and
the stack's secrets, made once per test run.

The compose and swarm modules share the ``xdist_group`` "docker" (see ``tests/conftest.py``), so with ``pytest
-n`` (``.ci/run``) they run one after the other in one worker: their image builds and stacks on the one Docker
daemon of a 2-core machine never overlap, and the image is built once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from docker_env import BUILD_TIMEOUT_S, REPO, compose_command, skip_or_fail


@pytest.fixture(scope="session")
def compose() -> list[str]:
    """The ``docker compose`` command; skips (fails under CI) without it or without a Docker daemon."""
    command = compose_command()
    if command is None:
        skip_or_fail(
            "`docker compose` v2 is not installed (scripts/docker_setup.sh installs it as a CLI plugin)"
        )
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        skip_or_fail("no Docker daemon answers (scripts/docker_setup.sh starts one, as root)")
    return command


@pytest.fixture(scope="session")
def image(compose) -> str:
    """``phylorl:latest``, built by scripts/build_image.sh from this checkout."""
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "build_image.sh")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert result.returncode == 0, (
        f"scripts/build_image.sh failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return "phylorl:latest"


@pytest.fixture(scope="session")
def secrets_dir(compose, tmp_path_factory) -> Path:
    """The stack's secrets, made by scripts/make_secrets.sh (as root: owned by the containers' uid 10001)."""
    directory = tmp_path_factory.mktemp("secrets")
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "make_secrets.sh"), str(directory)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return directory
