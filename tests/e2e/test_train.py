"""End to end: ``phylorl train`` runs redis, replay, learner and actors as real processes."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from helpers import phylorl_argv


def test_train_runs_the_whole_system(tmp_path, need):
    """``phylorl train --secure``: every service up, updates done, weights reach the actors, reports."""
    need("redis-server")
    run_dir = tmp_path / "run"
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "model: JC\nhorizon: 5\nbatch_size: 16\nhidden: 32\nmin_replay: 48\npublish_every: 5\n"
        "simulate_count: 3\nsimulate_taxa: '6:7'\nsimulate_sites: '200:300'\n"
        "learner: {checkpoint_every: 10}\n"
        "actor: {send_batch: 4}\n"
    )
    proc = subprocess.run(
        phylorl_argv(
            "train --actors 2 --updates 20 --minutes 8 --json --secure",
            *("--config", config, "--run-dir", run_dir),
        ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    # --json: stdout is that one object (the report's line is on stderr)
    assert json.loads(proc.stdout) == summary
    assert summary["reason"] == "updates done"
    assert summary["weights_version"] >= 20
    assert summary["updates"] == 20  # the learner's own count, not a scrape from before it stopped
    # stderr is a pipe here: plain progress lines (no live redraw), then the totals and the stop, each on its
    # own line
    lines = proc.stderr.splitlines()
    progress = [
        i
        for i, line in enumerate(lines)
        if line.lstrip().split("s  updates ")[0].isdigit() and "env steps" in line
    ]
    assert (
        progress
        and lines.index("preparing the corpus ...")
        < lines.index("starting redis, replay, learner and actors ...")
        < progress[0]
    )
    totals = next(i for i, line in enumerate(lines) if line.startswith("stopped: updates done"))
    assert "updates 20  env steps" in lines[totals - 1]
    assert all(code == 0 for code in summary["exit_codes"].values()), summary["exit_codes"]
    # actors were answered by newer weights than the initial version 0
    series = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert max(r["actor_weights_version"] for r in series) >= 5
    assert max(r["env_steps"] for r in series) > 0 and max(r["replay_size"] for r in series) >= 48
    # the actors' time waiting on inference, from their own counters: a share of their time (0 before they
    # start)
    last = series[-1]
    assert last["actors"] == 2 and 0.0 < last["actor_inference_wait_s"] <= 2 * last["time_s"]
    assert all(r["actor_inference_wait_fraction"] >= 0.0 for r in series[1:])
    assert (run_dir / "checkpoints" / "latest").exists()
    for name in ("redis", "replay", "learner", "actor-0", "actor-1"):
        assert (run_dir / "logs" / f"{name}.log").stat().st_size > 0
    for png in ("learning_curve.png", "update_latency.png", "throughput.png"):
        assert (run_dir / "report" / png).read_bytes()[:4] == b"\x89PNG"
    rows = (run_dir / "learner" / "updates.csv").read_text().splitlines()
    assert len(rows) == 21  # header + one row per update
    # --secure: gRPC with TLS and the token, Redis with its ACL user; the secrets are the owner's alone and
    # no log holds them
    secrets = {p.name: p for p in (run_dir / "secrets").iterdir()}
    assert set(secrets) >= {
        "ca.crt",
        "server.crt",
        "server.key",
        "grpc_token",
        "redis_password",
        "redis_users.acl",
    }
    assert all(p.stat().st_mode & 0o077 == 0 for p in secrets.values())
    replay_log = (run_dir / "logs" / "replay.log").read_text()
    assert '"tls_cert_file": "' in replay_log and '"redis_username": "phylorl"' in replay_log
    logs = (
        "".join(p.read_text(errors="replace") for p in (run_dir / "logs").iterdir())
        + proc.stdout
        + proc.stderr
    )
    for name in ("grpc_token", "redis_password"):
        assert secrets[name].read_text().strip() not in logs


def test_train_prometheus_scrapes_the_local_run(tmp_path, need):
    """``phylorl train --prometheus PORT``: the installed Prometheus scrapes every service of the run
    under the compose stack's job names, and the dashboards' kind of query answers."""
    import urllib.parse
    import urllib.request

    from services.launcher.supervisor import free_port

    need("redis-server")
    need("prometheus")
    port = free_port()
    run_dir = tmp_path / "run"
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "model: JC\nhorizon: 5\nbatch_size: 16\nhidden: 32\nmin_replay: 48\npublish_every: 5\n"
        "simulate_count: 2\nsimulate_taxa: '6:6'\nsimulate_sites: '200:200'\n"
    )
    # started as a shell starts a background job (`phylorl train ... &`, nohup): SIGINT ignored from the
    # start, so Python installs no KeyboardInterrupt handler; the run must still stop cleanly on the SIGINT
    # below
    proc = subprocess.Popen(
        phylorl_argv(
            "train --actors 2 --updates 0 --minutes 4 --no-report",
            *("--config", config, "--run-dir", run_dir, "--prometheus", port),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )

    def query(expr):
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=2) as reply:
            return json.loads(reply.read())["data"]["result"]

    def actor_targets():
        """The actors' metrics addresses of ports.json (None until the run has written it)."""
        try:
            ports = json.loads((run_dir / "ports.json").read_text())
        except (OSError, ValueError):
            return None
        return {f"127.0.0.1:{p}" for p in ports["actors"]}

    jobs = {"replay", "learner", "actor", "prometheus"}
    try:
        deadline = time.monotonic() + 240
        up, updates, actors = {}, [], set()
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                up = {(r["metric"]["job"], r["metric"]["instance"]): r["value"][1] for r in query("up")}
                updates = query("sum(phylorl_learner_updates_total)")
            except OSError:
                pass
            actors = {instance for job, instance in up if job == "actor"}
            if (
                {job for job, _ in up} == jobs
                and set(up.values()) == {"1"}
                and actors == actor_targets()
                and updates
                and float(updates[0]["value"][1]) > 0
            ):
                break
            time.sleep(1)
        stopped = (
            "" if proc.poll() is None else f"run ended ({proc.returncode}): {proc.stderr.read()[-3000:]}"
        )
        # every service scraped, each of the actors under its own address
        assert {job for job, _ in up} == jobs and set(up.values()) == {"1"}, (up, stopped)
        assert actors == actor_targets(), up
        assert updates and float(updates[0]["value"][1]) > 0
        ports = json.loads((run_dir / "ports.json").read_text())
        assert ports["prometheus"] == port
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the run stops every service and writes its summary
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["reason"] == "interrupted" and summary["ports"]["prometheus"] == port
    assert summary["exit_codes"]["prometheus"] == 0


def test_train_restarts_killed_services_and_goes_on(tmp_path, need):
    """kill -9 of the replay service, of an actor and of the learner during ``phylorl train``: each is
    started again (logged, counted in the summary), the learner resumes from its last checkpoint with
    weights versions that never go back, it goes on to its last update, and the run ends well."""
    import os

    need("redis-server")
    run_dir = tmp_path / "run"
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "model: JC\nhorizon: 5\nbatch_size: 16\nhidden: 32\nmin_replay: 48\npublish_every: 5\n"
        "simulate_count: 2\nsimulate_taxa: '6:6'\nsimulate_sites: '200:200'\nrestart_backoff_s: 0.5\n"
        "learner: {checkpoint_every: 10}\nactor: {send_batch: 4}\n"
    )
    proc = subprocess.Popen(
        phylorl_argv(
            "train --actors 2 --updates 120 --minutes 6 --no-report",
            *("--config", config, "--run-dir", run_dir),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def updates() -> float:
        lines = (
            (run_dir / "metrics.jsonl").read_text().splitlines()
            if (run_dir / "metrics.jsonl").exists()
            else []
        )
        return json.loads(lines[-1])["updates"] if lines else 0.0

    def pid_of(module: str, port: int) -> int:
        out = subprocess.run(
            ["pgrep", "-f", f"{module} .*--port {port}( |$)"], capture_output=True, text=True
        ).stdout
        return int(out.split()[0])

    def metrics_pid_of(module: str, port: int) -> int:
        out = subprocess.run(
            ["pgrep", "-f", f"{module} .*--metrics-port {port}( |$)"], capture_output=True, text=True
        ).stdout
        return int(out.split()[0])

    try:
        deadline = time.monotonic() + 240
        while updates() < 10:
            assert time.monotonic() < deadline and proc.poll() is None, "the run did not start updating"
            time.sleep(0.5)
        ports = json.loads((run_dir / "ports.json").read_text())
        os.kill(pid_of("services.replay", ports["replay"]["grpc"]), 9)
        os.kill(metrics_pid_of("services.actor", ports["actors"][0]), 9)
        while updates() < 40:
            assert time.monotonic() < deadline + 120 and proc.poll() is None, "no updates after the restarts"
            time.sleep(0.5)
        os.kill(pid_of("services.learner", ports["learner"]["grpc"]), 9)
        out, err = proc.communicate(timeout=420)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["reason"] == "updates done" and summary["weights_version"] >= 120
    assert summary["restarts"] == {"replay": 1, "actor-0": 1, "learner": 1}
    seen = [
        json.loads(line)["actor_weights_version"]
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    seen = [v for v in seen if v >= 0]
    assert seen == sorted(seen)  # the versions the actors were answered with never went back
    # (a learner killed after its last checkpoint resumes below the published version, logs it and
    # continues from the published one; one killed right at a checkpoint has nothing to skip)
    assert all(code == 0 for code in summary["exit_codes"].values()), summary["exit_codes"]
    events = (run_dir / "logs" / "supervisor.log").read_text()
    assert "replay exited with status -9" in events and "actor-0 started again" in events


def test_a_stop_while_the_corpus_is_prepared_ends_the_run_before_any_service_starts(tmp_path):
    """Ctrl-C during the corpus' preparation (minutes for a large corpus) ends the run there: no alignment is
    started after it, no service is started at all, and the summary says the run was interrupted."""
    import os
    import threading

    import numpy as np

    from phylorl.phylo import format_fasta, parse_model
    from phylorl.phylo.simulate import simulate_dataset
    from services.launcher.config import TrainConfig
    from services.launcher.run import run_local

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    count = 2 * (os.cpu_count() or 1) + 2  # more than the processes that prepare them (one per core)
    for i in range(count):
        data = simulate_dataset(6, 60, np.random.default_rng(i), model=parse_model("JC"))
        (corpus / f"a{i}.fasta").write_text(format_fasta(data.alignment))
    stop, stages = threading.Event(), []
    stop.set()  # as if Ctrl-C came before the first alignment was done
    config = TrainConfig(alignments=str(corpus), model="JC", cache_dir=str(tmp_path / "cache"))
    summary = run_local(
        config, tmp_path / "run", stop=stop, on_stage=lambda text, partial: stages.append(text)
    )
    assert summary["reason"] == "interrupted" and summary["exit_codes"] == {}
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["reason"] == "interrupted"
    assert not any(text.startswith("starting") for text in stages)
    # those under way when it stopped
    assert len(list((tmp_path / "cache").glob("*.json"))) <= (os.cpu_count() or 1)
