"""Commands to Redis for the replay store: :func:`send` runs many in one round trip (a redis-py pipeline),
:func:`guarded_write` runs them as one Lua script, atomic as a MULTI/EXEC transaction is, and only if the
table's key range in Redis is the one the caller expects (see :mod:`services.replay.store` for why)."""

from __future__ import annotations

import hashlib
import os

import redis

# KEYS[1] the meta hash; ARGV: expected head, expected next_key, the staged value's temporary name and final
# name (both empty when none), then each command as its argument count followed by its arguments.
# Refuses, writing nothing and dropping the staged value, when the key range moved.
_GUARDED_WRITE = b"""
local range = redis.call('HMGET', KEYS[1], 'head', 'next_key')
local head, next_key = range[1] or '0', range[2] or '0'
if head ~= ARGV[1] or next_key ~= ARGV[2] then
  if ARGV[3] ~= '' then redis.call('DEL', ARGV[3]) end
  return redis.error_reply('STALE_RANGE ' .. head .. ' ' .. next_key)
end
if ARGV[3] ~= '' then
  redis.call('RENAME', ARGV[3], ARGV[4])
  redis.call('PERSIST', ARGV[4])
end
local i = 5
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + n))
  i = i + n + 1
end
return 1
"""
_GUARDED_WRITE_SHA = hashlib.sha1(_GUARDED_WRITE).hexdigest().encode()
# a staged value whose script never ran (the connection broke between them) expires
_STAGED_TTL_MS = 3_600_000


class TableMoved(redis.RedisError):
    """Redis holds another key range than this store last saw: a write whose answer was lost landed
    late (or another writer uses the prefix). Nothing was written; re-read the table and try again."""


def guarded_write(
    client: redis.Redis, meta: bytes, expected: tuple[int, int] | None, commands: list[tuple], staged=None
) -> None:
    """Run ``commands`` atomically if the hash ``meta`` still holds the key range ``expected``
    ``(head, next_key)``; raise :class:`TableMoved` (nothing written) if not.

    ``staged``: ``(name, value)`` of a bulky string set with the commands. Its bytes go to Redis in a plain
    SET under a temporary name that no other write uses, and the script renames it into place, because
    a script's own arguments cost Redis a copy of the bytes into Lua and another out of it.
    """
    if expected is None:
        raise RuntimeError("the table must be opened before it is written")
    temp, name = (
        (b"", b"") if staged is None else (b"%s:staged:%s" % (meta, os.urandom(8).hex().encode()), staged[0])
    )
    args = [b"%d" % expected[0], b"%d" % expected[1], temp, name]
    args += [arg for command in commands for arg in (b"%d" % len(command), *command)]
    stage = [] if staged is None else [(b"SET", temp, staged[1], b"PX", _STAGED_TTL_MS)]
    for script in ((b"EVALSHA", _GUARDED_WRITE_SHA), (b"EVAL", _GUARDED_WRITE)):
        try:
            send(client, [*stage, (*script, 1, meta, *args)])
            return
        except redis.exceptions.NoScriptError:
            stage = []  # staged already; the script is not cached (a new or restarted Redis): send it itself
        except redis.ResponseError as e:
            found = str(e).split("STALE_RANGE ", 1)
            if len(found) == 2:
                head, next_key = found[1].split()[:2]
                raise TableMoved(
                    f"{meta.decode()} holds keys {head}..{int(next_key) - 1}, not "
                    f"{expected[0]}..{expected[1] - 1} as this service last saw: a write "
                    f"that timed out landed late, or another writer uses this prefix"
                ) from None
            raise


def send(client: redis.Redis, commands: list[tuple]) -> list:
    """Run ``commands`` in one round trip (a pipeline, no transaction) and return their replies."""
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return pipe.execute()
