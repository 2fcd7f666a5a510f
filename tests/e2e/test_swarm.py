"""Docker Swarm end to end: ``docker stack deploy`` of deploy/docker-stack.yml on a single-node swarm.

The flow: the image (``scripts/build_image.sh``, as the compose test builds it), a swarm (``docker swarm
init --advertise-addr 127.0.0.1`` when this daemon is in none; left again afterwards), the node labelled
``phylorl.learner=true`` (the learner's placement constraint), then ``docker stack deploy`` of the stack
file with 2 actors, Grafana left out (its image cannot be pulled here) and the test's short-run settings.
It waits until Prometheus (published in host mode) has every target up, the two actors found by DNS on the
overlay network (``endpoint_mode: dnsrr``), and the learner's weights version advances; then ``docker
service scale <stack>_actor=3`` and waits until the third actor is scraped and stepping. The stack is
always removed (configs, network and volumes too). Needs a Docker daemon; skipped without one, except
under CI, where it fails.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from test_compose import (
    BUILD_TIMEOUT_S,
    SCALE_TIMEOUT_S,
    SCRAPE_WAIT_S,
    TEST_OVERRIDE,
    TRAIN_TIMEOUT_S,
    UP_TIMEOUT_S,
    Stack,
    _all_up,
    _first_value,
    _wait_for,
    scale_to_three_and_check,
)

from services.launcher.supervisor import free_port

REPO = Path(__file__).resolve().parents[2]
STACK_FILE = REPO / "deploy" / "docker-stack.yml"
TOTAL_TIMEOUT_S = BUILD_TIMEOUT_S + UP_TIMEOUT_S + TRAIN_TIMEOUT_S + 2 * SCALE_TIMEOUT_S + 300
pytestmark = [pytest.mark.slow, pytest.mark.timeout(TOTAL_TIMEOUT_S), pytest.mark.xdist_group("docker")]


def docker(*args: str, timeout_s: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s)
    if check and result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed ({result.returncode}): {result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def swarm(compose) -> str:
    """This daemon as a one-node swarm (initialised here if it is in none, left at the end); the node id."""
    state = docker("info", "--format", "{{.Swarm.LocalNodeState}}").stdout.strip()
    created = state == "inactive"
    if created:
        docker("swarm", "init", "--advertise-addr", "127.0.0.1")
    node = docker("info", "--format", "{{.Swarm.NodeID}}").stdout.strip()
    docker("node", "update", "--label-add", "phylorl.learner=true", node)
    try:
        yield node
    finally:
        if created:
            docker("swarm", "leave", "--force", check=False)


class SwarmStack(Stack):
    """A deployed stack: Prometheus queries as in the compose test, on a host-mode published port."""

    def __init__(self, directory: Path, secrets: Path):
        self.project = f"phylorl-e2e-{uuid.uuid4().hex[:8]}"
        self.prometheus_port = free_port()
        spec = yaml.safe_load(STACK_FILE.read_text())
        del spec["services"]["grafana"]  # its image cannot be pulled here (see docs/deploy.md)
        for name in ("grafana-datasource", "grafana-dashboards", "grafana-dashboard"):
            del spec["configs"][name]
        del spec["volumes"]["grafana-data"]
        for name, override in TEST_OVERRIDE["services"].items():
            spec["services"][name]["environment"].update(override["environment"])
        for name, config in spec["configs"].items():  # the stack file names its configs relative to deploy/
            config["file"] = str((STACK_FILE.parent / config["file"]).resolve())
        for name, secret in spec["secrets"].items():  # ${PHYLORL_SECRETS:-./secrets}/<file>
            secret["file"] = str(secrets / secret["file"].rsplit("/", 1)[1])
        spec["services"]["prometheus"]["ports"][0]["published"] = self.prometheus_port
        self.file = directory / "docker-stack.test.yml"
        self.file.write_text(yaml.safe_dump(spec))

    def deploy(self) -> None:
        result = subprocess.run(
            ["docker", "stack", "deploy", "--compose-file", str(self.file), self.project],
            capture_output=True,
            text=True,
            timeout=UP_TIMEOUT_S,
            env={**os.environ, "PHYLORL_ACTORS": "2"},
        )
        if result.returncode != 0:
            raise RuntimeError(f"docker stack deploy failed: {result.stderr[-3000:]}")

    def scale_actors(self, replicas: int) -> None:
        docker("service", "scale", "--detach", f"{self.project}_actor={replicas}")

    def logs(self) -> str:
        out = []
        for service in ("redis", "replay", "learner", "actor", "prometheus"):
            result = docker(
                "service",
                "logs",
                "--tail",
                "30",
                "--no-trunc",
                f"{self.project}_{service}",
                timeout_s=60,
                check=False,
            )
            out.append(f"--- {service}\n{result.stdout[-3000:]}{result.stderr[-1000:]}")
        return "\n".join(out)

    def remove(self) -> None:
        docker("stack", "rm", self.project, check=False)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            left = docker(
                "ps", "-aq", "--filter", f"label=com.docker.stack.namespace={self.project}"
            ).stdout.split()
            networks = docker(
                "network", "ls", "-q", "--filter", f"label=com.docker.stack.namespace={self.project}"
            )
            if not left and not networks.stdout.split():
                break
            time.sleep(2)
        volumes = docker("volume", "ls", "-q", "--filter", f"label=com.docker.stack.namespace={self.project}")
        for volume in volumes.stdout.split():
            docker("volume", "rm", volume, check=False)


def test_swarm_stack_trains_and_scales_actors(swarm, image, secrets_dir, tmp_path):
    stack = SwarmStack(tmp_path, secrets_dir)
    try:
        stack.deploy()
        targets = _wait_for(
            lambda: _all_up(stack, actors=2), "every Prometheus target up with 2 actors", UP_TIMEOUT_S
        )
        assert {t["labels"]["job"] for t in targets} == {"replay", "learner", "actor", "prometheus"}
        learner = docker(
            "service", "ps", "--format", "{{.Node}} {{.CurrentState}}", f"{stack.project}_learner"
        ).stdout
        assert "Running" in learner  # placed by its constraint on the labelled node

        version = "max(phylorl_learner_weights_version)"
        first = _first_value(stack, version, "the weights version scraped", TRAIN_TIMEOUT_S)
        _wait_for(
            lambda: (stack.value(version) or first) > first,
            f"the weights version to pass {first:g}",
            TRAIN_TIMEOUT_S,
        )
        _wait_for(
            lambda: (stack.value("sum(phylorl_replay_inserted_total)") or 0.0) > 0,
            # scraped on its own schedule: see test_compose
            "the replay's inserts scraped",
            SCRAPE_WAIT_S,
        )

        scale_to_three_and_check(stack, targets, lambda: stack.scale_actors(3))
    finally:
        print(stack.logs())
        stack.remove()
    left = docker("ps", "-aq", "--filter", f"label=com.docker.stack.namespace={stack.project}").stdout.split()
    assert not left, f"containers left after stack rm: {left}"
