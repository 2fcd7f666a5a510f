"""The prioritised replay table's logic, shared by the replay service (``services/replay``, which keeps the
records in Redis) and the tests' in-process run (``tests/memory_replay.py``): a sum tree
over ``priority ** alpha``, the table of keys and priorities, and the samples-per-insert rate limiter.
Needs numpy only (no torch, no numba).
"""

from .priority_table import PriorityTable
from .rate_limiter import RateLimiter
from .sumtree import SumTree, check_priorities

__all__ = ["PriorityTable", "RateLimiter", "SumTree", "check_priorities"]
