"""Commands to Redis for the replay store: many commands in one write, and writes guarded by the key range.

:func:`send` packs commands with hiredis and sends them on a pooled connection directly, because
redis-py's generic path spends microseconds per argument. :func:`guarded_write` runs commands as one Lua
script, which is atomic as a MULTI/EXEC transaction is, and only if the table's key range in Redis is the
one the caller expects (see :mod:`services.replay.store` for why).
"""

from __future__ import annotations

import hashlib
import os

import hiredis
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
_STAGED_TTL_MS = 3_600_000  # a staged value whose script never ran (the connection broke between them) expires


class TableMoved(redis.RedisError):
    """Redis holds another key range than this store last saw: a write whose answer was lost landed
    late (or another writer uses the prefix). Nothing was written; re-read the table and try again."""


def guarded_write(client: redis.Redis, meta: bytes, expected: tuple[int, int] | None, commands: list[tuple],
                  staged: tuple[bytes, bytes] | None = None) -> None:
    """Run ``commands`` atomically if the hash ``meta`` still holds the key range ``expected``
    ``(head, next_key)``; raise :class:`TableMoved` (nothing written) if not.

    ``staged``: ``(name, value)`` of a bulky string set with the commands. Its bytes go to Redis in a plain
    SET under a temporary name that no other write uses, and the script renames it into place, because
    a script's own arguments cost Redis a copy of the bytes into Lua and another out of it (about
    5 µs per kB more Redis CPU, measured on the EPYC).
    """
    if expected is None:
        raise RuntimeError("the table must be opened before it is written")
    temp, name = (b"", b"") if staged is None else (b"%s:staged:%s" % (meta, os.urandom(8).hex().encode()), staged[0])
    args = [b"%d" % expected[0], b"%d" % expected[1], temp, name]
    for command in commands:
        args.append(b"%d" % len(command))
        args.extend(command)
    stage = [] if staged is None else [(b"SET", temp, staged[1], b"PX", _STAGED_TTL_MS)]
    for script in ((b"EVALSHA", _GUARDED_WRITE_SHA), (b"EVAL", _GUARDED_WRITE)):
        try:
            send(client, [*stage, (*script, 1, meta, *args)])
            return
        except redis.exceptions.NoScriptError:
            stage = []  # staged already; the script is not cached (a new or restarted Redis): send it itself
        except redis.ResponseError as e:
            message = str(e)
            if message.startswith("STALE_RANGE "):
                head, next_key = message.split()[1:3]
                raise TableMoved(f"{meta.decode()} holds keys {head}..{int(next_key) - 1}, not "
                                 f"{expected[0]}..{expected[1] - 1} as this service last saw: a write "
                                 f"that timed out landed late, or another writer uses this prefix") from None
            raise


def send(client: redis.Redis, commands: list[tuple]) -> list:
    """Run ``commands`` with one write and return their replies. A connection that fails midway is
    dropped (its replies would be out of step)."""
    payload = b"".join([piece for c in commands for piece in _pack(c)])
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        connection.send_packed_command([payload])
        replies, error = [], None
        for _ in commands:
            try:
                replies.append(connection.read_response())
            except redis.ResponseError as e:  # read the other replies too: the connection stays in step
                error = error or e
                replies.append(e)
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)
    if error is not None:
        raise error
    return replies


def _pack(command: tuple) -> list[bytes | memoryview]:
    """RESP pieces of ``command``: hiredis packs the runs of small arguments, and a bulky one is left as it
    is, so that the one join of the whole request is its only copy."""
    bulky = [i for i, a in enumerate(command) if isinstance(a, (bytes, memoryview)) and len(a) > 4096]
    if not bulky:
        return [hiredis.pack_command(command)]
    parts, start = [b"*%d\r\n" % len(command)], 0
    for i in [*bulky, len(command)]:
        if i > start:
            run = hiredis.pack_command(command[start:i])
            parts.append(memoryview(run)[run.index(b"\r\n") + 2:])  # without the run's own count
        if i < len(command):
            parts += [b"$%d\r\n" % len(command[i]), command[i], b"\r\n"]
        start = i + 1
    return parts
