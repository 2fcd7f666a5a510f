"""``benchmarks/thread_profile.py`` with a real py-spy on a real process: a thread that spins in one function
and one that sleeps are told apart, each thread group summed over its threads."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import thread_profile  # noqa: E402

PROGRAM = textwrap.dedent("""
    import sys, threading, time

    def spin_here():
        while True:
            sum(range(1000))

    def sleep_here():
        while True:
            time.sleep(0.01)

    for i in range(2):
        threading.Thread(target=spin_here, name=f"spinner-{i}", daemon=True).start()
    threading.Thread(target=sleep_here, name="sleeper", daemon=True).start()
    print("ready", flush=True)
    time.sleep(60)
""")


@pytest.mark.skipif(shutil.which("py-spy") is None, reason="py-spy is installed with the dev extras")
def test_a_spinning_and_a_sleeping_thread_are_told_apart(tmp_path):
    process = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        raw = tmp_path / "raw.txt"
        spy = thread_profile.record(process.pid, 2, raw, rate=50)
        assert spy.wait(60) == 0, spy.stderr.read()
    finally:
        process.kill()
        process.wait()
    summary = thread_profile.summarize(raw, top=3, depth=1)
    spinners, sleeper = summary["spinner"], summary["sleeper"]
    assert spinners["threads"] == 2 and spinners["samples"] > sleeper["samples"] / 2
    assert max(spinners["where"], key=spinners["where"].get).startswith("spin_here (<string>:")
    assert max(sleeper["where"], key=sleeper["where"].get).startswith("sleep_here (<string>:")
    assert sum(spinners["where"].values()) == pytest.approx(1.0, abs=0.01)


def test_group_names_drop_the_thread_number():
    assert [
        thread_profile.group_name(n)
        for n in (
            "batch-prefetcher-1",
            "ThreadPoolExecutor-0_12",
            "MainThread",
            "Thread-2 (_serve)",
            "priorities",
        )
    ] == ["batch-prefetcher", "ThreadPoolExecutor", "MainThread", "Thread-2 (_serve)", "priorities"]


def test_a_raw_file_with_odd_lines_is_read_for_what_it_holds(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text(
        "thread (0x1): worker-1;run (threading.py:1);work (job.py:7) 30\n"
        "garbage without a count\n"
        "thread (0x2): worker-2;run (threading.py:1);wait (job.py:9) 10\n"
    )
    summary = thread_profile.summarize(raw, depth=1)
    assert summary == {
        "worker": {"threads": 2, "samples": 40, "where": {"work (job.py:7)": 0.75, "wait (job.py:9)": 0.25}}
    }
