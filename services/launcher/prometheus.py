"""Prometheus for a local run (``phylorl train --prometheus``): the compose stack's scrape jobs pointed at
the run's own ports, so the dashboards' queries work on a run that was started without Docker."""

from __future__ import annotations

import shutil
import urllib.request
from pathlib import Path

import yaml

from .supervisor import LaunchError, Service, Supervisor

DEPLOY_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "prometheus.yml"
"""The compose stack's Prometheus configuration: the jobs (and their names) the dashboards query."""


def local_config(targets: dict[str, list[str]], scrape_s: float = 1.0) -> dict:
    """:data:`DEPLOY_CONFIG` with each job's targets replaced by ``targets[job]`` (static host:port
    lists; jobs without targets are dropped), scraped every ``scrape_s`` seconds."""
    if not DEPLOY_CONFIG.is_file():
        raise LaunchError(f"{DEPLOY_CONFIG} is missing: --prometheus needs the repository's deploy/ folder")
    config = yaml.safe_load(DEPLOY_CONFIG.read_text())
    interval = f"{scrape_s:g}s"
    config["global"].update(scrape_interval=interval, scrape_timeout=interval, evaluation_interval=interval)
    config["scrape_configs"] = [
        {"job_name": job["job_name"], "static_configs": [{"targets": targets[job["job_name"]]}]}
        for job in config["scrape_configs"]
        if targets.get(job["job_name"])
    ]
    return config


def start_prometheus(sup: Supervisor, directory: Path, port: int, targets: dict[str, list[str]]) -> Service:
    """Start the installed ``prometheus`` on ``127.0.0.1:port`` scraping ``targets`` (plus itself),
    keeping its data in ``directory``; returns once it answers ``/-/ready``."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise LaunchError(
            "prometheus is not installed (Debian package prometheus; scripts/install.sh installs it)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    config = local_config({**targets, "prometheus": [f"127.0.0.1:{port}"]})
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    argv = [
        binary,
        f"--config.file={directory / 'prometheus.yml'}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    service = sup.add(Service("prometheus", argv, sup.run_dir / "logs" / "prometheus.log"))
    sup.wait_for(service, lambda: ready(f"http://127.0.0.1:{port}"), "answer /-/ready", timeout_s=60.0)
    return service


def ready(url: str) -> bool:
    """Whether the Prometheus at ``url`` answers ``/-/ready``."""
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2.0) as reply:
            return reply.status == 200
    except OSError:
        return False
