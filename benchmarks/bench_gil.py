"""What threads running Python cost a thread that makes torch calls, per interpreter switch interval; one JSON line.

The learner's process runs its update loop, the endpoint's batching thread, gRPC threads and prefetch threads under
one interpreter lock. Every torch call lets the lock go, and the caller must take it back afterwards: when another
thread is running Python then, the caller waits until that thread blocks or the switch interval
(``sys.setswitchinterval``, Python's default 5 ms) forces a hand-over. This measures it in isolation: one thread
makes ``calls`` small torch calls then waits ``wait_ms`` without the lock (as for a device sync), with ``busy``
threads running pure Python, and reports the round's median time and the busy threads' work per second, for each
switch interval. ``LearnerConfig.switch_interval_ms`` sets the learner's.

``--batch``: also the GPU feed's work on a design-size sampled batch (128 transitions of 20 taxa, compact moves) as
a prefetch thread does it, here on the CPU: the batch written into its one staging block (``Stager.stage``, per
round: ``stage_ms``), and the batch brought to the device in one call (``batch_arrival.arrive``: a copy per element
type, the views, the moves' expansion; here the device is the CPU, so the copies are views), per round
(``batch_ms``).

Usage: python benchmarks/bench_gil.py [--intervals-ms 5,1,0.5,0.2] [--busy 0,1,3] [--calls 1,5,25] [--seconds 1.5]
                                      [--batch]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

import torch

from common import emit, machine


def busy_loop(stop: threading.Event, done: list) -> None:
    while not stop.is_set():
        total = 0
        for i in range(20000):
            total += i
        done[0] += 1


def rounds_ms(calls: int, wait_s: float, seconds: float) -> float:
    x = torch.zeros(1000)
    spent = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started = time.perf_counter()
        for _ in range(calls):
            x.add_(1.0)
        time.sleep(wait_s)
        spent.append(time.perf_counter() - started)
    return round(statistics.median(spent) * 1e3, 2)


def batch_round():
    """Two functions doing what a prefetch thread does with one sampled batch: stage it, and bring it to the device
    (views, expansion)."""
    from common import episode_transitions
    from phylorl.agent.batch_arrival import arrive
    from phylorl.agent.batch_transfer import Stager
    from phylorl.agent.packed_batch import collate_records
    from phylorl.wire.codec import PackedRecords
    from phylorl.wire.record import encode_transition

    transitions = episode_transitions(128, 20, seed=0)[0][:128]
    batch = collate_records(PackedRecords.from_records([encode_transition(t) for t in transitions]), compact=True)[0]
    stager = Stager()  # staged again each round; the block below keeps a buffer of its own
    block = Stager().stage(batch)

    def one() -> None:
        arrive(block, torch.device("cpu"))
    one()
    return (lambda: stager.stage(batch)), one


def timed_ms(fn, seconds: float) -> float:
    spent = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started = time.perf_counter()
        fn()
        spent.append(time.perf_counter() - started)
    return round(statistics.median(spent) * 1e3, 3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--intervals-ms", default="5,1,0.5,0.2", help="switch intervals to measure (ms)")
    p.add_argument("--busy", default="0,1,3", help="numbers of threads running Python")
    p.add_argument("--calls", default="1,5,25", help="torch calls per round")
    p.add_argument("--wait-ms", type=float, default=5.0, help="the round's wait without the lock (ms)")
    p.add_argument("--seconds", type=float, default=1.5, help="per setting")
    p.add_argument("--batch", action="store_true", help="also a design-size batch's staging, views and moves' "
                   "expansion")
    args = p.parse_args()
    torch.set_num_threads(1)
    batch = batch_round() if args.batch else None
    results = []
    for interval in map(float, args.intervals_ms.split(",")):
        sys.setswitchinterval(interval / 1e3)
        for busy in map(int, args.busy.split(",")):
            stop, done = threading.Event(), [0]
            threads = [threading.Thread(target=busy_loop, args=(stop, done), daemon=True) for _ in range(busy)]
            for t in threads:
                t.start()
            started = time.perf_counter()
            round_ms = {str(calls): rounds_ms(calls, args.wait_ms / 1e3, args.seconds)
                        for calls in map(int, args.calls.split(","))}
            stage_ms = timed_ms(batch[0], args.seconds) if batch else None
            batch_ms = timed_ms(batch[1], args.seconds) if batch else None
            work = done[0] / (time.perf_counter() - started)
            stop.set()
            for t in threads:
                t.join()
            results.append({"switch_interval_ms": interval, "busy_threads": busy, "round_ms_by_calls": round_ms,
                            **({"stage_ms": stage_ms, "batch_ms": batch_ms} if batch else {}),
                            "busy_work_per_s": round(work, 1) if busy else None})
    emit({"bench": "gil", "machine": machine(), "wait_ms": args.wait_ms, "results": results})


if __name__ == "__main__":
    main()
