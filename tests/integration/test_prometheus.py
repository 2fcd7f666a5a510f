"""A real Prometheus (Debian's binary) scrapes a local stack: every target is up, every dashboard query has
data.

The stack (fixture ``local_stack``) runs the services as processes on loopback with the launcher's own
supervisor: the replay service on a real ``redis-server``, the learner and two actors. Prometheus runs the
jobs of deploy/prometheus/prometheus.yml with the targets pointed at the local processes (the actors' DNS
discovery becomes a static list: the compose end-to-end test covers DNS) and a 1 s scrape interval.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from services.launcher.prometheus import ready
from services.launcher.supervisor import Service, Supervisor, flags, free_port

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json"))
PROMETHEUS_CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"
DATASOURCE_CONFIG = REPO / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
RATE_INTERVAL = "10s"  # stands in for Grafana's $__rate_interval (10 scrapes at 1 s)
READY_TIMEOUT_S = 120.0
DATA_TIMEOUT_S = 60.0
METRIC_SERVICE = {
    "phylorl_learner_": "learner",
    "phylorl_inference_": "learner",
    "phylorl_actor_": "actor",
    "phylorl_replay_": "replay",
}


def dashboard_queries() -> list[tuple[str, str, str]]:
    """``(dashboard file, panel title / refId, expr)`` of every query of every dashboard."""
    found = []
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel.get("targets", []):
                found.append((path.name, f"{panel['title']} / {target['refId']}", target["expr"]))
    return found


def services_of(expr: str) -> set[str]:
    """The services whose metrics ``expr`` reads (from the metric names' prefixes)."""
    names = re.findall(r"\bphylorl_[a-z0-9_]+", expr)
    return {
        service for name in names for prefix, service in METRIC_SERVICE.items() if name.startswith(prefix)
    }


# ---------------------------------------------------------------- the local stack


@dataclass
class LocalStack:
    """The services as processes on loopback, run by the launcher's own :class:`Supervisor`, and the
    Prometheus targets they expose, by job name."""

    supervisor: Supervisor
    targets: dict[str, list[str]] = field(default_factory=dict)
    grpc: dict[str, str] = field(default_factory=dict)  # gRPC address by service (replay, learner)

    @property
    def services(self) -> set[str]:
        return set(self.targets)

    def start(self, name: str, module: str, args: dict, port: int = 0) -> None:
        sup = self.supervisor
        argv = [sys.executable, "-m", module, *flags(args)]
        sup.add(Service(name, argv, sup.run_dir / f"{name}.log", port))

    def check_alive(self) -> None:
        for service in self.supervisor.services:
            if not service.alive:
                raise RuntimeError(
                    f"{service.name} exited with {service.process.returncode}:\n{service.log_tail(40)}"
                )


@pytest.fixture(scope="module")
def local_stack(redis_server, tmp_path_factory) -> Iterator[LocalStack]:
    directory = tmp_path_factory.mktemp("stack")
    stack = LocalStack(Supervisor(directory))
    replay_port, replay_metrics = free_port(), free_port()
    replay = f"127.0.0.1:{replay_port}"
    learner_port, learner_metrics = free_port(), free_port()
    corpus = directory / "corpus"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "phylorl.cli",
            "simulate",
            "--out",
            str(corpus),
            "--count",
            "4",
            "--taxa",
            "7:8",
            "--sites",
            "300:400",
            "--seed",
            "1",
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        stack.start(
            "replay",
            "services.replay",
            {
                "host": "127.0.0.1",
                "port": replay_port,
                "metrics_port": replay_metrics,
                "redis_url": redis_server.url,
                "key_prefix": f"test:prometheus:{os.getpid()}",
                "capacity": 2000,
                "min_size_to_sample": 8,
            },
            replay_port,
        )
        stack.start(
            "learner",
            "services.learner",
            {
                "port": learner_port,
                "metrics_port": learner_metrics,
                "replay_address": replay,
                "redis_url": redis_server.url,
                "run_dir": directory / "run",
                "device": "cpu",
                "batch_size": 8,
                "publish_every": 2,
                "torch_threads": 1,
            },
            learner_port,
        )
        stack.targets.update(
            replay=[f"127.0.0.1:{replay_metrics}"], learner=[f"127.0.0.1:{learner_metrics}"], actor=[]
        )
        stack.grpc.update(replay=replay, learner=f"127.0.0.1:{learner_port}")
        for i in range(2):
            metrics_port = free_port()
            stack.start(
                f"actor-{i}",
                "services.actor",
                {
                    "learner_address": f"127.0.0.1:{learner_port}",
                    "replay_address": replay,
                    "metrics_port": metrics_port,
                    "alignments": corpus,
                    "envs": 2,
                    "seed": i,
                    "cache_dir": directory / "prepared",
                },
            )
            stack.targets["actor"].append(f"127.0.0.1:{metrics_port}")
        yield stack
    finally:
        stack.supervisor.stop_all(timeout_s=20)


# ---------------------------------------------------------------- Prometheus


@dataclass
class Prometheus:
    url: str
    jobs: set[str]

    def get(self, path: str, **params: str) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.get("/api/v1/query", query=expr)["result"]


def local_prometheus_config(stack: LocalStack, port: int) -> dict:
    """deploy/prometheus/prometheus.yml with the jobs' targets replaced by the local stack's, scraped every
    1 s (the same function ``phylorl train --prometheus`` uses)."""
    from services.launcher.prometheus import local_config

    return local_config({**stack.targets, "prometheus": [f"127.0.0.1:{port}"]})


@pytest.fixture(scope="module")
def prometheus(local_stack: LocalStack, tmp_path_factory) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    if binary is None:
        message = "prometheus is not installed (Debian package prometheus; scripts/install.sh installs it)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    directory = tmp_path_factory.mktemp("prometheus")
    port = free_port()
    config = local_prometheus_config(local_stack, port)
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    log_path = directory / "prometheus.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(
        url=f"http://127.0.0.1:{port}", jobs={job["job_name"] for job in config["scrape_configs"]}
    )
    try:
        _wait_for(lambda: ready(server.url), "Prometheus ready", 30, process, log_path)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for(
    condition,
    what: str,
    timeout_s: float,
    process: subprocess.Popen | None = None,
    log_path: Path | None = None,
    stack: LocalStack | None = None,
):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"{what}: process exited with {process.returncode}:\n{log_path.read_text()[-3000:]}"
            )
        if stack is not None:
            stack.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.5)


def _targets(server: Prometheus) -> list[dict]:
    return server.get("/api/v1/targets", state="active")["activeTargets"]


@pytest.fixture(scope="module")
def scraped(prometheus: Prometheus, local_stack: LocalStack) -> Prometheus:
    """Prometheus once every target is up and the learner has updated (a stack whose processes first compile
    their kernels, beside another test's on a small machine, may take a while to start training: the panels'
    own wait is for their data, not for that)."""
    _wait_for(
        lambda: (t := _targets(prometheus)) and all(x["health"] == "up" for x in t),
        "every target up",
        READY_TIMEOUT_S,
        stack=local_stack,
    )
    _wait_for(
        lambda: any(float(r["value"][1]) > 0 for r in prometheus.query("phylorl_learner_updates_total")),
        "the learner's first update",
        READY_TIMEOUT_S,
        stack=local_stack,
    )
    return prometheus


# ---------------------------------------------------------------- the tests


def test_dashboards_use_the_provisioned_datasource():
    uid = yaml.safe_load(DATASOURCE_CONFIG.read_text())["datasources"][0]["uid"]
    assert DASHBOARDS, "no dashboard JSON under deploy/grafana/dashboards/"
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            if panel["type"] == "row":
                continue
            assert panel["datasource"]["uid"] == uid, (path.name, panel["title"])
            assert panel["targets"] and all(t["datasource"]["uid"] == uid for t in panel["targets"]), panel[
                "title"
            ]
            assert panel["description"], f"panel {panel['title']!r} does not say what it shows"


def test_every_service_metric_is_documented():
    """docs/metrics.md names every metric the services define (those whose metrics module exists)."""
    from prometheus_client.metrics import MetricWrapperBase

    documented = (REPO / "docs" / "metrics.md").read_text()
    missing = []
    for service in ("replay", "learner", "actor"):
        if importlib.util.find_spec(f"services.{service}.metrics") is None:
            continue
        module = importlib.import_module(f"services.{service}.metrics")
        for metric in vars(module).values():
            if isinstance(metric, MetricWrapperBase):
                family = metric.describe()[0]
                name = family.name + ("_total" if family.type == "counter" else "")
                if f"`{name}`" not in documented and f"`{name}{{" not in documented:
                    missing.append(name)
    assert not missing, f"docs/metrics.md does not list {missing}"


def test_every_panel_is_explained_in_docs():
    """docs/deploy.md's panel table (``dashboard.py --markdown``) has every panel with its description."""
    text = (REPO / "docs" / "deploy.md").read_text()
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            if panel["type"] != "row":
                title, description = (panel[k].replace("|", "\\|") for k in ("title", "description"))
                assert f"| {title} | {description} |" in text, (
                    f"docs/deploy.md lacks panel {panel['title']!r}: paste `dashboard.py --markdown` into it"
                )


def test_dashboard_json_matches_its_generator():
    result = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "grafana" / "dashboard.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_every_target_is_up(scraped: Prometheus, local_stack: LocalStack):
    targets = _targets(scraped)
    assert {t["labels"]["job"] for t in targets} == scraped.jobs == local_stack.services | {"prometheus"}
    expected = sum(len(v) for v in local_stack.targets.values()) + 1
    assert len(targets) == expected
    assert all(t["health"] == "up" for t in targets), [(t["scrapeUrl"], t["lastError"]) for t in targets]


def test_healthcheck_script(scraped: Prometheus, local_stack: LocalStack):
    """deploy/healthcheck.py, as compose runs it: 0 for SERVING services and a ready Prometheus, 1
    otherwise."""

    def check(target: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(REPO / "deploy" / "healthcheck.py"), target, "--timeout-s", "5"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )

    for service, address in local_stack.grpc.items():
        _wait_for(
            lambda: check(address).returncode == 0, f"{service} SERVING", READY_TIMEOUT_S, stack=local_stack
        )
    assert check(f"{scraped.url}/-/ready").returncode == 0
    closed = check(f"127.0.0.1:{free_port()}")
    assert (
        closed.returncode == 1 and closed.stderr.startswith("unhealthy: ") and "UNAVAILABLE" in closed.stderr
    )
    missing = check(f"{scraped.url}/no-such-page")
    assert missing.returncode == 1 and "404" in missing.stderr


@pytest.mark.parametrize(
    "dashboard, panel, expr", dashboard_queries(), ids=[f"{d}:{p}" for d, p, _ in dashboard_queries()]
)
def test_dashboard_query_returns_data(scraped: Prometheus, local_stack: LocalStack, dashboard, panel, expr):
    assert services_of(expr) <= local_stack.services, f"{expr} reads services the stack does not run"
    query = expr.replace("$__rate_interval", RATE_INTERVAL)

    def finite_result():
        result = scraped.query(query)
        return result if any(math.isfinite(float(r["value"][1])) for r in result) else None

    try:
        result = _wait_for(finite_result, f"{panel}: {query}", DATA_TIMEOUT_S, stack=local_stack)
    except TimeoutError:
        pytest.fail(
            f"{dashboard} panel {panel!r}: no finite value from {query!r}; got {scraped.query(query)}"
        )
    assert result
