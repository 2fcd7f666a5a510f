"""The actor's outbox: memory first, then the spool file, in order; nothing lost below the limits."""

import pytest

from services.actor.outbox import Outbox


def drain(box, batch=3):
    out = []
    while box:
        front = box.front(batch)
        numbers = [n for _, _, n in front]
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # consecutive: one insert each
        out += front
        box.commit(len(front))
    return out


def test_beyond_memory_records_wait_on_disk_and_come_back_in_order(tmp_path):
    box = Outbox(4, tmp_path / "a.spool")
    for i in range(11):
        box.append(b"r%d" % i, float(i))
    assert len(box.memory) == 4 and box.spooled == 7 and len(box) == 11 and box.dropped == 0
    assert (tmp_path / "a.spool").stat().st_size > 0
    front = box.front(2)
    assert [n for _, _, n in front] == [0, 1]
    box.commit(2)  # room in memory: the oldest spooled records move back
    assert len(box.memory) == 4 and box.spooled == 5
    for i in range(11, 14):  # appends go behind the spooled ones, never ahead of them
        box.append(b"r%d" % i, float(i))
    rest = drain(box)
    assert [(r, p, n) for r, p, n in rest] == [(b"r%d" % i, float(i), i) for i in range(2, 14)]
    assert (tmp_path / "a.spool").stat().st_size == 0  # read back entirely: the file starts again
    box.close()
    assert not (tmp_path / "a.spool").exists()


def test_without_a_spool_the_oldest_are_dropped_and_with_a_full_spool_the_newest(tmp_path):
    box = Outbox(3)
    for i in range(5):
        box.append(b"x", 0.0)
    assert box.dropped == 2 and [n for _, _, n in box.front(5)] == [2, 3, 4]
    full = Outbox(2, tmp_path / "b.spool", spool_max_bytes=2 * (20 + 100))
    for i in range(6):
        full.append(bytes(100), 0.0)
    assert len(full) == 4 and full.dropped == 2  # 2 in memory, 2 on disk, the newest 2 dropped
    assert [n for _, _, n in drain(full)] == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        Outbox(0)
