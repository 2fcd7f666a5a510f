"""Start, watch and stop the local processes of an embedded run (redis, replay, learner, actors)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common import security


class LaunchError(RuntimeError):
    """A service of the local run could not be started (the message is one line naming what and where)."""


class StartInterrupted(Exception):
    """The run was asked to stop (Ctrl-C, SIGTERM) while its services were starting."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def flags(values: dict) -> list[str]:
    """``--key value`` for each item, underscores in a key as dashes."""
    return [part for key, value in values.items() for part in (f"--{key.replace('_', '-')}", str(value))]


@dataclass
class Service:
    """One child process, its log file and (when it has one) its port."""

    name: str
    argv: list[str]
    log_path: Path
    port: int = 0
    process: subprocess.Popen | None = None
    log_file: object = field(default=None, repr=False)
    restarts: int = 0
    """Times this service was started again after it died."""
    restart_due: float | None = None
    """``time.monotonic()`` at which a dead service is started again (None: not dead, or given up)."""

    def start(self, env: dict) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_file is not None and not self.log_file.closed:
            self.log_file.close()
        self.log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            self.argv,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            process_group=0,
        )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Supervisor:
    """Owns the child processes; :meth:`stop_all` is safe to call more than once."""

    def __init__(self, run_dir: Path, stop=None):
        self.run_dir = Path(run_dir).resolve()  # every path a child is given is absolute
        self.stop = stop  # a threading.Event: set, waiting for a service to start gives up (StartInterrupted)
        self.services: list[Service] = []
        path = os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])
        self.env = {"PYTHONUNBUFFERED": "1", **os.environ, "PYTHONPATH": path}  # the repository first

    def add(self, service: Service) -> Service:
        self.services.append(service)
        service.start(self.env)
        return service

    def revive(self, max_restarts: int, backoff_s: float, log) -> list[Service]:
        """Start again every dead service (the learner only when it failed) once its backoff has passed:
        ``backoff_s`` doubled per earlier restart, at most 30 s; ``log(message)`` records each event.
        Returns the services that died more than ``max_restarts`` times (the run cannot go on)."""
        now = time.monotonic()
        given_up = []
        for service in self.services:
            if service.alive or (service.name == "learner" and service.process.returncode == 0):
                continue
            if service.restarts >= max_restarts:
                given_up.append(service)
                continue
            if service.restart_due is None:
                delay = min(30.0, backoff_s * 2**service.restarts)
                service.restart_due = now + delay
                log(
                    f"{service.name} exited with status {service.process.returncode}; restarting in "
                    f"{delay:.1f} s (restart {service.restarts + 1} of at most {max_restarts})"
                )
            elif now >= service.restart_due:
                service.restart_due = None
                service.restarts += 1
                service.start(self.env)
                log(f"{service.name} started again (pid {service.process.pid})")
        return given_up

    def start_redis(self, acl_file: Path, auth) -> Service:
        """redis-server on a free loopback port, AOF in the run directory, users from ``acl_file``;
        ready once ``auth`` (a :class:`~services.common.security.RedisAuth`) gets an answer to PING."""
        exe = shutil.which("redis-server")
        if exe is None:
            raise LaunchError("redis-server is not installed (scripts/install.sh installs it)")
        port = free_port()
        data = self.run_dir / "redis"
        data.mkdir(parents=True, exist_ok=True)
        # appendfsync always: an insert is on disk before replay acknowledges it, so even kill -9 of Redis
        # loses no acknowledged transition (one fsync per insert batch)
        argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--appendonly", "yes"]
        argv += ["--appendfsync", "always", "--save", "", "--protected-mode", "yes"]
        argv += ["--aclfile", str(Path(acl_file).resolve())]
        service = self.add(Service("redis", argv, self.run_dir / "logs" / "redis.log", port=port))
        self.wait_for(service, lambda: _redis_ping(f"redis://127.0.0.1:{port}/0", auth), "answer PING")
        return service

    def wait_for(self, service: Service, ready, what: str, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.stop is not None and self.stop.is_set():
                raise StartInterrupted(f"stopped while waiting for {service.name} to {what}")
            if not service.alive:
                raise LaunchError(
                    f"{service.name} exited (status {service.process.returncode}) before it could "
                    f"{what}; see {service.log_path}"
                )
            if ready():
                return
            time.sleep(0.2)
        raise LaunchError(f"{service.name} did not {what} within {timeout_s:.0f} s; see {service.log_path}")

    def wait_serving(self, service: Service, credentials=None, timeout_s: float = 300.0) -> None:
        address = f"127.0.0.1:{service.port}"
        self.wait_for(
            service, lambda: grpc_serving(address, credentials=credentials), "report SERVING", timeout_s
        )

    def stop_all(self, timeout_s: float = 30.0) -> dict[str, int | None]:
        """SIGTERM actors first, then learner, replay, Redis and Prometheus (which sees the others stop);
        SIGKILL what is left of a group after ``timeout_s``."""
        groups = ("actor", "learner", "replay", "redis", "prometheus")

        def group(service: Service) -> str:  # any other service goes with the last group
            kind = service.name.split("-")[0]
            return kind if kind in groups else groups[-1]

        for name in groups:
            members = [s for s in self.services if s.alive and group(s) == name]
            for s in members:
                s.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            for s in members:
                try:
                    s.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    s.process.kill()
                    s.process.wait()
        for s in self.services:
            if s.log_file is not None and not s.log_file.closed:
                s.log_file.close()
        return {s.name: (s.process.returncode if s.process else None) for s in self.services}


def grpc_serving(target: str, timeout_s: float = 1.0, credentials=None) -> bool:
    """Whether ``target``'s health service says SERVING (``credentials``: a
    :class:`~services.common.security.ClientCredentials` for a secured service)."""
    try:
        with security.channel(target, credentials) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def _redis_ping(url: str, auth) -> bool:
    import redis

    try:
        return bool(security.redis_client(url, auth).ping())
    except redis.RedisError:
        return False
