"""`python -m services.replay` as a real process: config from flags and env, health, metrics, SIGTERM
drain."""

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest

from phylorl.nets.synthetic import random_transition
from services.replay.client import ReplayClient

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def replay_process(redis_server, redis_client, free_port_factory, tmp_path):
    port, metrics_port = free_port_factory(), free_port_factory()
    log_path = tmp_path / "replay.log"
    env = dict(
        os.environ, PYTHONPATH=str(REPO), PHYLORL_REPLAY_ALPHA="0.5", PHYLORL_REPLAY_MIN_SIZE_TO_SAMPLE="5"
    )
    command = [sys.executable, "-m", "services.replay", "--host", "127.0.0.1", "--capacity", "100"]
    command += ["--port", str(port), "--metrics-port", str(metrics_port), "--grace-s", "5"]
    command += ["--redis-url", redis_server.url, "--key-prefix", "test:proc"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    yield process, port, metrics_port, log_path
    if process.poll() is None:
        process.kill()
        process.wait()


def test_serves_reports_metrics_and_drains_on_sigterm(replay_process):
    process, port, metrics_port, log_path = replay_process
    with ReplayClient(f"127.0.0.1:{port}") as client:
        client.wait_until_serving(timeout_s=30)
        rng = np.random.default_rng(0)
        client.insert([random_transition(20, rng) for _ in range(3)], timeout_s=5)
        stats = client.stats()
        assert (stats.size, stats.alpha, stats.min_size_to_sample, stats.capacity) == (3, 0.5, 5, 100)

        metrics = (
            urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        )
        assert "phylorl_replay_inserted_total 3.0" in metrics
        assert "phylorl_replay_size 3.0" in metrics
        assert 'phylorl_replay_insert_seconds_bucket{le="0.0001"}' in metrics
        assert "phylorl_replay_sample_seconds_count" in metrics

        # a sample waiting for min_size (5 > 3) is in flight when SIGTERM arrives
        outcome = {}

        def waiting_sample():
            try:
                client.sample(2, timeout_s=60)
            except grpc.RpcError as e:
                outcome["code"], outcome["details"] = e.code(), e.details()

        thread = threading.Thread(target=waiting_sample)
        thread.start()
        deadline = time.monotonic() + 10
        while client.stats().waiting_samples < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        thread.join(timeout=10)
    assert outcome["code"] == grpc.StatusCode.UNAVAILABLE and "shutting down" in outcome["details"]
    log = log_path.read_text()
    assert '"alpha": 0.5' in log and '"capacity": 100' in log  # the config is logged at start
    assert "stopped after draining" in log
