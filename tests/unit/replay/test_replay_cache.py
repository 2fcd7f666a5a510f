"""The replay service's record cache: lookups by key across insert batches, FIFO drops."""

import pytest

from phylorl.records.format import PackedRecords
from services.replay.cache import RecordCache


def batch(*records: bytes) -> PackedRecords:
    return PackedRecords.from_records(list(records))


def test_lookups_across_batches_and_drops():
    cache = RecordCache()
    cache.append(5, batch(b"a", b"bb", b"ccc"))  # keys 5, 6, 7
    cache.append(8, batch(b"d"))  # key 8
    cache.append(9, batch(b"ee", b"f"))  # keys 9, 10
    assert [bytes(r) for r in cache.get([10, 5, 8, 7, 7, 9])] == [b"f", b"a", b"d", b"ccc", b"ccc", b"ee"]
    cache.drop_below(7)  # keys 5, 6 gone but 7 still held: the first batch stays
    assert bytes(cache.get([7])[0]) == b"ccc"
    cache.drop_below(9)
    assert [bytes(r) for r in cache.get([9, 10])] == [b"ee", b"f"]
    assert cache._firsts == [9]
    cache.clear()
    cache.append(20, batch(b"g"))
    assert bytes(cache.get([20])[0]) == b"g"


def test_a_batch_must_follow_the_last_one():
    cache = RecordCache()
    cache.append(0, batch(b"a", b"b"))
    with pytest.raises(ValueError, match="batch at key 3 does not follow key 1"):
        cache.append(3, batch(b"c"))
