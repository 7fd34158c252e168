"""A profile's nodes as a text table: ``ae.profile().table()``."""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

from ._recorder import _Recorder

_SORT_KEYS = ("total", "count", "avg", "max", "waiting")

#: a row's figures, by node name: [count, total, min, max, waiting, offloaded, errors]
_Row = list[Any]

#: the value each ``sort_by`` orders the rows by
_ORDER: dict[str, Callable[[tuple[str, _Row]], float]] = {
    "total": lambda kv: kv[1][1],
    "count": lambda kv: kv[1][0],
    "avg": lambda kv: kv[1][1] / kv[1][0],
    "max": lambda kv: kv[1][3],
    "waiting": lambda kv: kv[1][4],
}

_HEADER = [
    "node",
    "count",
    "total ms",
    "% nodes",
    "avg us",
    "min us",
    "max us",
    "waiting ms",
    "offloaded",
    "errors",
]


def _table(rec: _Recorder, sort_by: str, row_limit: int | None) -> str:
    rows = _rows(rec)
    ordered = sorted(rows.items(), key=_ORDER[sort_by], reverse=True)
    shown = ordered if row_limit is None else ordered[:row_limit]
    node_time = sum(r[1] for r in rows.values())
    lines = _aligned([_HEADER, *(_cells(name, r, node_time) for name, r in shown)])
    if len(shown) < len(ordered):
        lines.append(f"({len(ordered) - len(shown)} more node types; row_limit=None shows all)")
    end = rec.t1 if rec.t1 is not None else perf_counter()
    n_gt = len(rec.graph_tasks)
    lines.append(
        f"{len(rec.nodes):,} nodes in {n_gt} backward{'s' if n_gt != 1 else ''}; "
        f"node time {node_time * 1e3:.3f} ms; profile {(end - rec.t0) * 1e3:.3f} ms"
    )
    return "\n".join(lines)


def _rows(rec: _Recorder) -> dict[str, _Row]:
    """The recorded nodes' figures, by name."""
    rows: dict[str, _Row] = {}
    for _, t0, t1, _, name, _, _, kernel, err, waited in rec.nodes:
        d = t1 - t0
        r = rows.get(name)
        if r is None:
            r = rows[name] = [0, 0.0, d, d, 0.0, 0, 0]
        r[0] += 1
        r[1] += d
        r[2] = min(r[2], d)
        r[3] = max(r[3], d)
        r[4] += waited
        r[5] += kernel == "offloaded"
        r[6] += err is not None
    return rows


def _cells(name: str, r: _Row, node_time: float) -> list[str]:
    return [
        name,
        f"{r[0]:,}",
        f"{r[1] * 1e3:.3f}",
        f"{100 * r[1] / node_time:.1f}" if node_time else "-",
        f"{r[1] / r[0] * 1e6:.1f}",
        f"{r[2] * 1e6:.1f}",
        f"{r[3] * 1e6:.1f}",
        f"{r[4] * 1e3:.3f}",
        f"{r[5]:,}",
        f"{r[6]:,}",
    ]


def _aligned(table: list[list[str]]) -> list[str]:
    """The header and body rows in columns (the name left-aligned), a rule under each part."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    sep = "  ".join("-" * w for w in widths)

    def line(row: list[str]) -> str:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        return "  ".join(cells).rstrip()

    return [line(table[0]), sep, *(line(r) for r in table[1:]), sep]
