"""docker compose end to end: build the image, run the stack with 2 actors, train, scale to 3, tear down.

The flow: ``scripts/build_image.sh`` (offline, from deploy/wheelhouse/; with Docker's layer cache a rebuild
after a source change redoes only the last layers), then ``up -d --scale actor=2`` of redis, replay, learner,
actor and prometheus (Grafana's image cannot be pulled on a machine without a registry: see docs/deploy.md),
wait until every Prometheus target is up (the two actors found by DNS) and the learner's weights version
advances, check that the stack is locked down and that a replay container killed with signal 9 is restarted by
compose, ``up -d --scale actor=3`` and wait until Prometheus scrapes the third actor. The project (a name of
its own, volumes included) is always taken down, even when a step fails; the services' logs are printed then.
Needs a Docker daemon (``scripts/docker_setup.sh`` installs and starts one, as root): skipped without one,
except under CI, where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from docker_env import BUILD_TIMEOUT_S

from services.launcher.supervisor import free_port

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "deploy" / "docker-compose.yml"
SERVICES = ["redis", "replay", "learner", "actor", "prometheus"]  # grafana: see the module docstring
UP_TIMEOUT_S = 300
TRAIN_TIMEOUT_S = 300
SCRAPE_WAIT_S = 30  # a few scrapes (5 s apart) of a counter that has already moved
SCALE_TIMEOUT_S = 120

# Settings of a short test run (the defaults suit a real run): learning starts after a few transitions.
TEST_OVERRIDE = {
    "services": {
        "replay": {
            "environment": {"PHYLORL_REPLAY_MIN_SIZE_TO_SAMPLE": "32", "PHYLORL_REPLAY_CAPACITY": "5000"}
        },
        "learner": {"environment": {"PHYLORL_LEARNER_BATCH_SIZE": "16"}},
        "actor": {"environment": {"PHYLORL_ACTOR_SEND_BATCH": "4"}},
    }
}

# A cold build (no base image, empty wheelhouse, no layer cache) takes ~15 min on 2 busy cores: past .ci/run's
# per-test --timeout, which this marker overrides.
TOTAL_TIMEOUT_S = BUILD_TIMEOUT_S + UP_TIMEOUT_S + TRAIN_TIMEOUT_S + 2 * SCALE_TIMEOUT_S + 300
pytestmark = [pytest.mark.slow, pytest.mark.timeout(TOTAL_TIMEOUT_S), pytest.mark.xdist_group("docker")]


class Stack:
    """One compose project (its own name, so several can coexist) with Prometheus on a free loopback port."""

    def __init__(self, compose: list[str], override: Path, secrets: Path):
        self.project = f"phylorl-e2e-{uuid.uuid4().hex[:8]}"
        self.prometheus_port = free_port()
        self.base = [
            *compose,
            "--project-name",
            self.project,
            "--file",
            str(COMPOSE_FILE),
            "--file",
            str(override),
        ]
        self.env = {
            **os.environ,
            "PHYLORL_BIND": "127.0.0.1",
            "PHYLORL_PROMETHEUS_PORT": str(self.prometheus_port),
            "PHYLORL_SECRETS": str(secrets),
        }

    def run(
        self, *args: str, timeout_s: float = UP_TIMEOUT_S, check: bool = True
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [*self.base, *args], env=self.env, capture_output=True, text=True, timeout=timeout_s, cwd=REPO
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"compose {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}"
            )
        return result

    def up(self, actors: int) -> None:
        self.run("up", "--detach", "--scale", f"actor={actors}", *SERVICES)

    def down(self) -> None:
        self.run("down", "--volumes", "--remove-orphans", "--timeout", "10", timeout_s=180, check=False)

    def logs(self) -> str:
        return self.run("logs", "--no-color", "--tail", "40", timeout_s=60, check=False).stdout

    def prometheus(self, path: str, **params: str) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"http://127.0.0.1:{self.prometheus_port}{path}{query}"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())["data"]

    def targets(self) -> list[dict]:
        try:
            return self.prometheus("/api/v1/targets", state="active")["activeTargets"]
        except OSError:
            return []

    def value(self, expr: str) -> float | None:
        try:
            result = self.prometheus("/api/v1/query", query=expr)["result"]
        except OSError:
            return None
        return float(result[0]["value"][1]) if result else None


def _wait_for(condition, what: str, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s")
        time.sleep(2)


def _first_value(stack: Stack, expr: str, what: str, timeout_s: float) -> float:
    """The value of ``expr`` once Prometheus has one (0 included)."""
    return _wait_for(lambda: (v := stack.value(expr)) is not None and (v,), what, timeout_s)[0]


def _all_up(stack: Stack, actors: int) -> list[dict] | None:
    targets = stack.targets()
    by_job = {
        job: [t for t in targets if t["labels"]["job"] == job] for job in ("replay", "learner", "actor")
    }
    if len(by_job["actor"]) != actors or not by_job["replay"] or not by_job["learner"]:
        return None
    return targets if all(t["health"] == "up" for t in targets) else None


@pytest.fixture
def stack(compose, image, secrets_dir, tmp_path) -> Iterator[Stack]:
    override = tmp_path / "docker-compose.test.yml"
    override.write_text(yaml.safe_dump(TEST_OVERRIDE))
    stack = Stack(compose, override, secrets_dir)
    try:
        yield stack
    finally:
        print(stack.logs())
        stack.down()
        left = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={stack.project}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        assert not left, f"containers left after down: {left}"


def test_compose_trains_and_scales_actors(stack: Stack):
    stack.up(actors=2)
    targets = _wait_for(
        lambda: _all_up(stack, actors=2), "every Prometheus target up with 2 actors", UP_TIMEOUT_S
    )
    assert {t["labels"]["job"] for t in targets} == {"replay", "learner", "actor", "prometheus"}

    version = "max(phylorl_learner_weights_version)"
    first = _first_value(stack, version, "the weights version scraped", TRAIN_TIMEOUT_S)
    _wait_for(
        lambda: (stack.value(version) or first) > first,
        f"the weights version to pass {first:g}",
        TRAIN_TIMEOUT_S,
    )
    # an update needs inserted transitions, but each service is scraped on its own 5 s schedule: the replay's
    # and the actors' counters may show them a scrape after the learner's version does
    for counter in ("sum(phylorl_replay_inserted_total)", "sum(phylorl_actor_env_steps_total)"):
        _wait_for(lambda: (stack.value(counter) or 0.0) > 0, f"{counter} above 0", SCRAPE_WAIT_S)
    check_locked_down(stack)
    check_a_killed_container_restarts(stack, version)

    scale_to_three_and_check(stack, targets, lambda: stack.up(actors=3))


def check_a_killed_container_restarts(stack: Stack, version: str) -> None:
    """kill -9 of the replay container's process (from the host, as a crash would end it): compose's
    ``restart: unless-stopped`` starts it again (its restart count goes to 1), it becomes healthy from its
    Redis table, and the learner's weights version goes on rising."""
    container = stack.run("ps", "-q", "replay").stdout.strip()

    def inspect(field: str) -> str:
        return subprocess.run(
            ["docker", "inspect", "-f", field, container], capture_output=True, text=True
        ).stdout.strip()

    os.kill(int(inspect("{{.State.Pid}}")), 9)
    _wait_for(
        lambda: inspect("{{.RestartCount}}") == "1" and inspect("{{.State.Health.Status}}") == "healthy",
        "the killed replay container restarted and healthy",
        UP_TIMEOUT_S,
    )
    before = stack.value(version) or 0.0
    _wait_for(
        lambda: (stack.value(version) or 0.0) > before, "training going on after the restart", TRAIN_TIMEOUT_S
    )


def check_locked_down(stack: Stack) -> None:
    """Inside the running stack: every service runs as uid 10001, Redis refuses a client without the password
    and cannot even be reached from an actor (internal network), and the replay service refuses a gRPC call
    without the token although it comes over TLS."""

    def run_in(service: str, *command: str) -> subprocess.CompletedProcess:
        return stack.run("exec", "-T", service, *command, check=False, timeout_s=60)

    for service in ("redis", "replay", "learner", "actor", "prometheus"):
        assert run_in(service, "id", "-u").stdout.strip() == "10001", service
    assert "NOAUTH" in run_in("redis", "redis-cli", "-p", "6379", "ping").stdout
    unreachable = run_in(
        "actor", "python", "-c", "import socket; socket.create_connection(('redis', 6379), 3)"
    )
    assert unreachable.returncode != 0 and ("gaierror" in unreachable.stderr or "Errno" in unreachable.stderr)
    no_token = run_in(
        "actor", "python", "/opt/phylorl/healthcheck.py", "replay:50051", "--ca", "/run/secrets/ca_crt"
    )
    assert no_token.returncode == 1 and "UNAUTHENTICATED" in no_token.stderr
    with_token = run_in(
        "actor",
        "python",
        "/opt/phylorl/healthcheck.py",
        "replay:50051",
        "--ca",
        "/run/secrets/ca_crt",
        "--token-file",
        "/run/secrets/grpc_token",
    )
    assert with_token.returncode == 0, with_token.stderr


def scale_to_three_and_check(stack, targets: list[dict], scale) -> None:
    """``scale()`` 2 -> 3 actors; Prometheus then scrapes a third actor instance and it steps."""
    actors_before = {t["labels"]["instance"] for t in targets if t["labels"]["job"] == "actor"}
    scale()
    targets = _wait_for(lambda: _all_up(stack, actors=3), "the third actor scraped", SCALE_TIMEOUT_S)
    actors_after = {t["labels"]["instance"] for t in targets if t["labels"]["job"] == "actor"}
    assert actors_before < actors_after and len(actors_after) == 3
    new = (actors_after - actors_before).pop()
    _wait_for(
        lambda: stack.value(f'phylorl_actor_env_steps_total{{instance="{new}"}}'),
        f"the third actor ({new}) stepping",
        SCALE_TIMEOUT_S,
    )
