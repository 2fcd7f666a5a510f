"""What the Docker end-to-end tests need of the machine: the ``docker compose`` v2 command, and the rule that
a missing Docker skips locally but fails under CI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 1800


def compose_command() -> list[str] | None:
    """``docker compose`` (v2, the CLI plugin scripts/docker_setup.sh installs): the command the README
    shows."""
    if not shutil.which("docker"):
        return None
    version = subprocess.run(["docker", "compose", "version", "--short"], capture_output=True, text=True)
    return (
        ["docker", "compose"] if version.returncode == 0 and version.stdout.strip().startswith("2.") else None
    )


def skip_or_fail(message: str) -> None:
    pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
