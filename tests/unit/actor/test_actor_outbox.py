"""The actor's outbox: journal and memory, in order; nothing lost below the limits, not even by kill -9."""

import os
import signal
import subprocess
import sys

import pytest

from services.actor.outbox import Outbox, claim_orphans, read_journal


def drain(box, batch=3):
    out = []
    while box:
        front = box.front(batch)
        numbers = [n for _, _, n in front]
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # consecutive: one insert each
        out += front
        box.commit(len(front))
    return out


def test_beyond_memory_records_wait_in_the_journal_and_come_back_in_order(tmp_path):
    box = Outbox(4, tmp_path / "a.journal", producer="p")
    for i in range(11):
        box.append(b"r%d" % i, float(i))
    assert len(box.memory) == 4 and box.spooled == 7 and len(box) == 11 and box.dropped == 0
    front = box.front(2)
    assert [n for _, _, n in front] == [0, 1]
    box.commit(2)  # room in memory: the oldest journal-only records move back
    assert len(box.memory) == 4 and box.spooled == 5
    for i in range(11, 14):  # appends go behind the waiting ones, never ahead of them
        box.append(b"r%d" % i, float(i))
    rest = drain(box)
    assert [(r, p, n) for r, p, n in rest] == [(b"r%d" % i, float(i), i) for i in range(2, 14)]
    found = read_journal(tmp_path / "a.journal")
    assert found.producer == "p" and found.produced == 14 and found.pending == []
    box.close()
    assert not (tmp_path / "a.journal").exists()  # nothing waited: the journal goes with the actor


def test_without_a_journal_the_oldest_are_dropped_and_with_a_full_journal_the_newest(tmp_path):
    box = Outbox(3)
    for i in range(5):
        box.append(b"x", 0.0)
    assert box.dropped == 2 and [n for _, _, n in box.front(5)] == [2, 3, 4]
    full = Outbox(2, tmp_path / "b.journal", journal_max_bytes=6 + 4 * (21 + 100))
    for i in range(6):
        full.append(bytes(100), 0.0)
    assert len(full) == 4 and full.dropped == 2 and full.next_number == 4  # dropped ones get no number
    assert [n for _, _, n in drain(full)] == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        Outbox(0)


def test_kill_9_loses_nothing_the_journal_held_and_a_live_journal_is_not_claimed(tmp_path):
    """A process appends 100 records, the replay service confirms 40, and it is killed with signal 9: its
    journal gives back the other 60 with their numbers, and only once the process is gone."""
    script = f"""
import os, sys
sys.path.insert(0, {os.getcwd()!r})
from services.actor.outbox import Outbox
box = Outbox(16, {str(tmp_path / "dead.journal")!r}, producer="dead-producer")
for i in range(100):
    box.append(b"record-%d" % i, i / 10)
for _ in range(10):
    box.commit(len(box.front(4)))
print("ready", flush=True)
sys.stdin.read()
"""
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        assert claim_orphans(tmp_path) == []  # alive: its journal is locked
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        child.kill()
    claimed = claim_orphans(tmp_path)
    assert [path.name for path, _ in claimed] == ["dead.journal"]
    assert claim_orphans(tmp_path) == []  # held by the claim above: nobody else recovers it at the same time
    found = read_journal(tmp_path / "dead.journal")
    assert found.producer == "dead-producer" and found.produced == 100
    assert found.pending == [(b"record-%d" % i, i / 10, i) for i in range(40, 100)]
    for _, handle in claimed:
        handle.close()


def test_a_torn_last_entry_is_ignored(tmp_path):
    box = Outbox(8, tmp_path / "t.journal", producer="t")
    for i in range(5):
        box.append(b"abcdefgh", 1.0)
    box.commit(2)
    data = (tmp_path / "t.journal").read_bytes()
    (tmp_path / "t.journal").write_bytes(data + data[-(21 + 8) : -3])  # half of a further record
    found = read_journal(tmp_path / "t.journal")
    assert found.produced == 5 and [n for _, _, n in found.pending] == [2, 3, 4]


def test_a_large_journal_is_rewritten_with_what_still_waits(tmp_path):
    path = tmp_path / "c.journal"
    box = Outbox(4, path, producer="c")
    big = bytes(100_000)
    for i in range(60):  # 6 MB: beyond the size at which the journal is compacted
        box.append(big + b"%d" % i, float(i))
    drained = 0
    while len(box) > 10:
        drained += len(box.front(4))
        box.commit(len(box.front(4)))
    assert path.stat().st_size <= 3_100_000  # rewritten when half of the 6 MB was stored: that half is gone
    assert claim_orphans(tmp_path) == []  # the rewritten journal is locked too
    found = read_journal(path)
    assert found.produced == 60 and [n for _, _, n in found.pending] == list(range(drained, 60))
    rest = drain(box)
    assert [r for r, _, _ in rest] == [big + b"%d" % i for i in range(drained, 60)]
    box.close()
