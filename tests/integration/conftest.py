"""Fixtures for integration tests: a real ``redis-server`` on a free loopback port.

``redis_server``   one Redis for the whole test run (AOF on, RDB snapshots off, data in a temp dir).
``redis_client``   a client of it, with the database flushed before each test.
``redis_factory``  starts extra Redis processes (e.g. to stop and restart one on the same data dir);
                   every process it started is stopped after the test.
``free_port_factory``  returns :func:`free_port`, for servers a test starts itself.
``inference_factory``  starts real inference endpoints (learner's batching + gRPC) for a network config.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from inference_endpoint import start_inference

from services.launcher.supervisor import free_port

READY_TIMEOUT_S = 10.0


@dataclass
class RedisProcess:
    """A ``redis-server`` child process listening on ``127.0.0.1:port`` with its data in ``directory``."""

    port: int
    directory: Path
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port)

    def stop(self) -> None:
        """Shut down cleanly (SIGTERM: Redis fsyncs its AOF) and wait for the process to exit."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=READY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_redis(
    directory: Path,
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
    password: str | None = None,
    username: str | None = None,
) -> RedisProcess:
    """Start ``redis-server`` with AOF persistence in ``directory`` (plus ``extra_args``) and wait until it
    answers PING (as ``username``/``password`` when given)."""
    binary = shutil.which("redis-server")
    if binary is None:  # same policy as tests/conftest.py: skip locally, fail in CI
        message = "redis-server is not installed (scripts/install.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port() if port is None else port
    log = open(directory / "redis.log", "ab")
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(directory),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--daemonize",
            "no",
            *extra_args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    server = RedisProcess(port=port, directory=directory, process=process)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"redis-server exited with {process.returncode}: "
                f"{(directory / 'redis.log').read_text()[-2000:]}"
            )
        try:
            if redis.Redis(host="127.0.0.1", port=port, username=username, password=password).ping():
                return server
        except redis.ConnectionError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"redis-server on port {port} did not answer PING within {READY_TIMEOUT_S} s")
        time.sleep(0.05)


@pytest.fixture
def free_port_factory() -> Callable[[], int]:
    return free_port


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    client = redis_server.client()
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def redis_factory(tmp_path: Path) -> Iterator[Callable[..., RedisProcess]]:
    started: list[RedisProcess] = []

    def start(directory: Path | None = None, port: int | None = None, **kwargs) -> RedisProcess:
        server = start_redis(directory or tmp_path / f"redis{len(started)}", port, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def inference_factory() -> Iterator[Callable[..., str]]:
    """Starts endpoints with :func:`start_inference` (same arguments); returns each one's ``host:port``. All
    stopped afterwards."""
    running = []

    def start(cfg, **kwargs) -> str:
        server, inference, address = start_inference(cfg, **kwargs)
        running.append((server, inference))
        return address

    yield start
    for server, inference in running:
        server.stop(1.0)
        inference.close()
