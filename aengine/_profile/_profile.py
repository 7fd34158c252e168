"""``ae.profile()``: what the engine did, as a Chrome/Perfetto trace and a table.

How it records: NOTE [What a profile records] and NOTE [Forward ops in a
profile] in _recorder.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from os import PathLike
from time import perf_counter
from types import TracebackType
from typing import Any

from ..core import _graph, _trace
from ._events import _trace_events
from ._recorder import Progress, _print_progress, _Recorder
from ._table import _SORT_KEYS, _table

__all__ = ["profile"]


class profile:
    """Record what the engine does: nodes, waits, kernels, backwards; a trace and a table.

    Use it as ``with ae.profile() as p:`` or ``async with ae.profile() as p:``
    around code that runs backwards (``ae.sync`` or awaited, in any task or
    thread of the process).  While it records, every node takes the engine's
    general path and is timed, so a profiled backward runs slower; with no
    profile recording, the engine pays nothing for it.  One profile records at
    a time.

    * ``p.export_chrome_trace(path)`` writes a Trace Event JSON file: open it
      in the Perfetto UI (https://ui.perfetto.dev) or ``chrome://tracing``.
      A row per task and per thread that ran nodes, an async row per
      backward (overlapping backwards side by side) with its time slices and
      yields, arrows from each forward op to its backward node and from a
      node to its offloaded kernel, cancellations and errors marked.
    * ``p.events``: the same events, a list of dicts.
    * ``p.table()``: the nodes by total time (count, average, waits...).

    ``progress=True`` prints a line to stderr every ``progress_every``
    seconds (1.0) of each backward that runs that long (and a last one when
    it ends); a callable receives each report instead (its fields: ``graph_task``,
    ``depth``, ``elapsed``, ``nodes_done``, ``nodes_total``, ``node``, ``done``; its
    ``str()`` is the line printed).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> with ae.profile() as p:
        ...     (gx,) = ae.sync.grad((x.sin() * 2).sum(), [x])
        >>> sorted({e["name"] for e in p.events if e.get("cat") == "node"})
        ['MulBackward0', 'SinBackward0', 'SumBackward0']
        >>> print(p.table().splitlines()[-1])  # doctest: +ELLIPSIS
        3 nodes in 1 backward; node time ... ms; profile ... ms
        >>> p.export_chrome_trace("trace.json")  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        progress: bool | Callable[[Progress], Any] = False,
        progress_every: float = 1.0,
    ) -> None:
        if isinstance(progress_every, bool) or not isinstance(progress_every, int | float):
            raise TypeError(
                f"progress_every must be a number of seconds, got {type(progress_every).__name__} "
                f"{progress_every!r}"
            )
        if not progress_every > 0:
            raise ValueError(
                f"progress_every must be a positive number of seconds, got {progress_every}"
            )
        if progress is True:
            report: Callable[[Progress], Any] | None = _print_progress
        elif progress is False or progress is None:
            report = None
        elif callable(progress):
            report = progress
        else:
            raise TypeError(
                "progress must be True, False or a callable(report), got "
                f"{type(progress).__name__} {progress!r}"
            )
        self._report = report
        self._every = float(progress_every)
        self._rec: _Recorder | None = None
        self._events: list[dict[str, Any]] | None = None

    # -- recording ------------------------------------------------------------------------------
    def __enter__(self) -> profile:
        if self._rec is not None:
            raise RuntimeError("this ae.profile() already recorded; create a new ae.profile()")
        if _trace.active is not None:
            raise RuntimeError(
                "another ae.profile() is recording in this process; one records at a time "
                "(it sees every backward of the process): leave it first"
            )
        rec = self._rec = _Recorder(self._report, self._every)
        _graph.observe_sequence(rec.forward_op)
        _trace.install(rec)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        rec = self._rec
        if rec is None or rec.t1 is not None:
            return
        rec.t1 = perf_counter()
        _trace.install(None)
        _graph.observe_sequence(None)
        rec.tracks.clear()  # the tasks themselves (names are kept)

    async def __aenter__(self) -> profile:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- results ------------------------------------------------------------------------------
    def _recorder(self) -> _Recorder:
        if self._rec is None:
            raise RuntimeError(
                "this ae.profile() has not recorded yet: use it as `with ae.profile() as p:` "
                "around the code to profile, then read p.events / p.table()"
            )
        return self._rec

    @property
    def events(self) -> list[dict[str, Any]]:
        """The recorded events as Trace Event dicts (``ph``, ``name``, ``ts`` in us...)."""
        rec = self._recorder()
        if rec.t1 is None:  # still recording: a snapshot
            return _trace_events(rec)
        if self._events is None:
            self._events = _trace_events(rec)
        return self._events

    def table(self, sort_by: str = "total", row_limit: int | None = 20) -> str:
        """The nodes by name: count, total/average/min/max time, waits, offloads, errors.

        ``sort_by``: "total" (default), "count", "avg", "max" or "waiting";
        ``row_limit``: the number of rows (None: all).
        """
        if sort_by not in _SORT_KEYS:
            raise ValueError(
                f"sort_by must be one of {', '.join(map(repr, _SORT_KEYS))}; got {sort_by!r}"
            )
        if row_limit is not None and (
            isinstance(row_limit, bool) or not isinstance(row_limit, int) or row_limit < 0
        ):
            raise ValueError(f"row_limit must be a number of rows >= 0 or None, got {row_limit!r}")
        return _table(self._recorder(), sort_by, row_limit)

    def export_chrome_trace(self, path: str | PathLike[str]) -> None:
        """Write the events to ``path`` as Trace Event JSON (Perfetto UI, chrome://tracing)."""
        doc = {
            "traceEvents": self.events,
            "displayTimeUnit": "ms",
            "otherData": {"producer": "aengine.profile"},
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
