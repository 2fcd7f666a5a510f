"""``phylorl train``'s one progress line: redrawn in place on a terminal, printed every :data:`LOG_EVERY_S` on
a file or pipe (``nohup``, a CI log), where a live display would show nothing until the end."""

from __future__ import annotations

import math
import time
from dataclasses import fields

from .progress import Snapshot, rates

LOG_EVERY_S = 10.0
"""How often the line is printed when stderr is not a terminal."""


def _value(value: float, spec: str) -> str:
    """``value`` as ``spec``, or "–" where there is none yet (no update or episode in the interval)."""
    return "–" if math.isnan(value) else format(value, spec)


def describe(record: dict) -> str:
    """The line of a progress record (``metrics.jsonl``'s)."""
    return (
        f"{record['time_s']:6.0f}s  updates {record['updates']:.0f} ({record['updates_per_s']:.2f}/s, "
        f"{_value(record['mean_update_ms'], '.0f')} ms)  env steps {record['env_steps']:.0f} "
        f"({record['env_steps_per_s']:.1f}/s, "
        f"actors waiting {100 * record['actor_inference_wait_fraction']:.0f}%)"
        f"  replay {record['replay_size']:.0f}  "
        f"episode ΔlogL {_value(record['mean_episode_delta_loglik'], '.2f')}  "
        f"weights v{record['weights_version']:.0f}"
    )


def totals(summary: dict) -> str:
    """One line of a finished run's totals (from ``summary.json``)."""
    episodes = summary.get("episodes", 0) or 0
    mean = _value(summary.get("episode_delta_sum", 0.0) / episodes, ".2f") if episodes else "–"
    restarts = ", ".join(f"{name} {count}" for name, count in summary.get("restarts", {}).items())
    return (
        f"{summary.get('seconds', 0):6.0f}s  updates {summary.get('updates', 0):.0f}  env steps "
        f"{summary.get('env_steps', 0):.0f}  episodes {episodes:.0f} (mean ΔlogL {mean})  "
        f"weights v{summary.get('weights_version', 0):.0f}" + (f"  restarts: {restarts}" if restarts else "")
    )


class ProgressLine:
    """A context manager. :meth:`stage` sets the line to a step before the services run (printed there unless
    ``partial`` and within ``LOG_EVERY_S`` of the last line printed); :meth:`show` to a progress record
    (printed there every ``LOG_EVERY_S``, with the rates over that interval, not the last second's);
    :meth:`end` to the last line, always shown."""

    def __init__(self, console, first: str):
        from rich.live import Live
        from rich.text import Text

        self._console, self._text = console, Text(first)
        self._live = Live(self._text, console=console, refresh_per_second=2) if console.is_terminal else None
        self._printed_at, self._record = time.monotonic(), None
        if self._live is None:
            self._print()

    def __enter__(self) -> ProgressLine:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
        else:
            self._print()

    def stage(self, text: str, partial: bool = False) -> None:
        self._text.plain = text
        if self._live is None and (not partial or time.monotonic() - self._printed_at >= LOG_EVERY_S):
            self._print()

    def show(self, record: dict) -> None:
        if self._live is None:
            last = self._record
            if last is not None and record["time_s"] - last["time_s"] < LOG_EVERY_S:
                return
            self._record = record
            if last is not None:
                snapshots = [
                    Snapshot(**{f.name: r[f.name] for f in fields(Snapshot)}) for r in (last, record)
                ]
                record = {**record, **rates(*snapshots)}
        self._text.plain = describe(record)
        if self._live is None:
            self._print()

    def end(self, text: str) -> None:
        """The last line, shown when the context ends."""
        self._text.plain = text

    def _print(self) -> None:
        from rich.text import Text

        self._printed_at = time.monotonic()
        self._console.print(Text(self._text.plain), soft_wrap=True)
