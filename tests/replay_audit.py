"""Read back what a replay table holds, straight from Redis, for checks that must not trust the service:
:func:`read_table` parses the layout of :mod:`services.replay.store` with its own small parser, so a soak or a
test compares the actors' own counts against every record held, with its producer and sequence number."""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass

import redis

_HEAD = struct.Struct("<4sI")


@dataclass(frozen=True)
class TableContents:
    """The records held (keys ``head..next_key-1``, oldest first) and each one's ``(producer, number)``
    (``None`` for a record inserted without a producer)."""

    head: int
    next_key: int
    records: list[bytes]
    origins: list[tuple[str, int] | None]

    def duplicates(self) -> int:
        """Records held more than once (same producer and number), beyond their first copy."""
        counts = Counter(o for o in self.origins if o is not None)
        return sum(c - 1 for c in counts.values())

    def distinct_by_producer(self) -> dict[str, int]:
        """Producer -> how many of its numbers are held (each counted once)."""
        return dict(Counter(p for p, _ in set(o for o in self.origins if o is not None)))


def read_table(client: redis.Redis, prefix: str) -> TableContents:
    meta = client.hgetall(f"{prefix}:meta")
    if not meta:
        return TableContents(0, 0, [], [])
    head, next_key = int(meta[b"head"]), int(meta[b"next_key"])
    origins_of = {int(k): v.decode().rsplit(" ", 1) for k, v in client.hgetall(f"{prefix}:o").items()}
    records, origins = [], []
    for entry in client.lrange(f"{prefix}:bi", 0, -1):
        first, n = (int(x) for x in entry.split(b":"))
        blob = client.get(f"{prefix}:b:{first}")
        magic, count = _HEAD.unpack_from(blob)
        if magic != b"PRB1" or count != n:
            raise RuntimeError(f"{prefix}:b:{first} is not a batch of {n} records")
        offsets = struct.unpack_from(f"<{n + 1}I", blob, _HEAD.size + 8 * n)
        origin = origins_of.get(first)
        for i in range(n):
            if head <= first + i < next_key:
                records.append(blob[offsets[i] : offsets[i + 1]])
                origins.append((origin[0], int(origin[1]) + i) if origin else None)
    return TableContents(head, next_key, records, origins)
