"""A plan's run compiled to code: one generated function per stretch of nodes.

# NOTE [Plans compiled to code]
# The planned runner's loop reads, per node, its Step (a tuple to unpack),
# tests its kind and its "taken from the heap" flag, and fetches its
# buffer; about half the interpreter's work per node of a chain.  The
# stretches between two clock checks (CLOCK_EVERY nodes at the start of a
# ``run`` call, CLOCK_EVERY + 1 after each check: NOTE [Backward plans])
# are where nothing else happens, so each stretch is one generated
# function: straight-line code with its Steps as constants (the node's
# call, the gradient handed on, each route's buffer written in place),
# made once per distinct sequence of Steps (``compiled``: a chain has a
# handful, whatever its length), shared by every plan that has it, and
# looked up per start position when the plan is built (``code_lists``:
# C-level passes over the Steps' identities, sliced like the build).
#
# A stretch function runs exactly what the loop would: the same ``evaluate``
# calls in the same order, the same sums, the error check before a node
# taken from the heap (it returns STOP there), the buffers released as
# they are read; an exception from a node is recorded by ``failed`` at that
# node's position and raised again.  A stretch with a node the general
# path runs (GENERAL: it may return an awaitable mid-stretch), one past the
# plan's end, or one whose Steps would make too much code gets no function
# (None): the loop runs it node by node, as before.  Each start position
# has its function, so a ``run`` call that starts anywhere (after a
# yield, an awaited node, a hand-over) checks the clock at the same nodes
# as the general path.  Where no clock is read (a sync backward: no
# deadline) the runs of LONG nodes from LONG_AT on are one function each
# (``long_codes``), and the error is checked between two of them.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = [
    "ADD",
    "ADD_AT",
    "GENERAL",
    "NEW_ONE",
    "NEXT",
    "ONE_ROUTE",
    "ROUTES",
    "LONG",
    "LONG_AT",
    "STOP",
    "Step",
    "Stretch",
    "code_lists",
    "long_codes",
    "compiled",
]

#: returned by a stretch function where the loop would return None (an error
#: recorded before a node taken from the heap)
STOP = object()

#: ``fn(planned, run, bufs, p, b, create_graph, release, gt) -> buffer or STOP``:
#: the nodes at positions p, p+1, ... of ``run``, ``b`` the first one's buffer
#: when the node before handed it on (else None)
Stretch = Callable[..., Any]

#: the nodes of one function where no clock is read (a sync backward): the
#: runs of LONG nodes that start LONG_AT + k * LONG (after the first
#: stretch of a run from the start)
LONG = 16
LONG_AT = 3

#: distinct stretches compiled in this process (all plans); beyond it a new
#: one runs by the loop
MAX_CODES = 4096
#: routes in one stretch beyond which it is not compiled (a node of many edges)
MAX_ROUTES = 64

_codes: dict[tuple[Any, ...], Stretch | None] = {}
_lock = threading.Lock()

#: one position of a plan's run: (taken from the heap (the hot loop checks
#: for an error there) rather than run next directly, its kind, its
#: routing).  The run keeps nodes and InputBuffers by position (the node at
#: position p is number ``order[p]``), so gradients go to positions, named
#: by their offset from the step's own (so that equal steps are one tuple).
#: Kinds: GENERAL, the general path runs it (no routing); ROUTES, it runs
#: inline and routes by (output index, offset, slot, how) per edge that
#: carries a gradient; ONE_ROUTE, it runs inline and its one gradient makes
#: a one-slot buffer, routing (output index, offset); NEXT, the same where
#: that buffer's node runs next (offset 1), routing the output index: the
#: buffer goes straight to it (a chain's every link).
Step = tuple[bool, int, Any]
GENERAL, ROUTES, ONE_ROUTE, NEXT = 0, 1, 2, 3
#: how a gradient reaches its node's InputBuffer: the first one of a
#: one-slot buffer (NEW_ONE), added to what is there (ADD; ADD_AT where the
#: route names the buffer's position, not its offset), or, a number n > 1,
#: the first one of a buffer of n slots (a positive ``how``)
NEW_ONE, ADD, ADD_AT = 0, -1, -2


def compiled(steps: tuple[Any, ...]) -> Stretch | None:
    """The function of a stretch of these Steps (None: the loop runs it)."""
    fn = _codes.get(steps, _codes)
    if fn is not _codes:
        return fn  # type: ignore[return-value]
    with _lock:
        if len(_codes) >= MAX_CODES:
            return None
        fn = _make(steps)
        _codes[steps] = fn
    return fn


def _make(steps: tuple[Any, ...]) -> Stretch | None:
    if any(kind == GENERAL for _, kind, _ in steps):
        return None
    routes = sum(len(prog) for _, kind, prog in steps if kind == ROUTES)
    if routes > MAX_ROUTES:
        return None
    lines = [
        "def stretch(planned, run, bufs, p, b, cg, rel, gt):",
        "    try:",
    ]
    handed = None  # whether the buffer of the node at j was handed on (None: unknown)
    for j, (popped, kind, prog) in enumerate(steps):
        body = _node(j, popped, handed)
        body += _routes(j, kind, prog)
        lines += ["        " + line for line in body]
        handed = kind == NEXT
    if not handed:
        lines.append("        b = None")
    lines += [
        "        return b",
        "    except BaseException as exc:",
        "        planned.failed(gt, n, exc, p)",
        "        raise",
    ]
    space: dict[str, Any] = {"STOP": STOP}
    # (source made here from the Steps' ints alone: no outside text reaches it)
    exec(compile("\n".join(lines), "<aengine backward plan>", "exec"), space)
    fn: Stretch = space["stretch"]
    return fn


def _node(j: int, popped: bool, handed: bool | None) -> list[str]:
    """The code that runs the node at offset ``j`` into ``o`` (its gradients)."""
    at = f"p + {j}" if j else "p"
    out = []
    if popped:
        out.append("if gt.error is not None: return STOP")
    out.append(f"n = run[{at}]")
    if handed is None:  # the stretch's first node: handed on by the one before, or not
        out += ["if b is None:", f"    b = bufs[{at}]", f"    bufs[{at}] = None"]
    elif not handed:
        out += [f"b = bufs[{at}]", f"bufs[{at}] = None"]
    out.append("o = n.evaluate(b, cg, rel)")
    return out


def _routes(j: int, kind: int, prog: Any) -> list[str]:
    """The code that sends ``o`` on, as the loop's routing of the Step's kind."""
    if kind == NEXT:
        return [f"b = [o[{prog}]]"]
    if kind == ONE_ROUTE:
        k, q = prog
        return [f"bufs[p + {j + q}] = [o[{k}]]"]
    out = []
    for k, t, nr, how in prog:
        if how == NEW_ONE:
            out.append(f"bufs[p + {j + t}] = [o[{k}]]")
        elif how > 0:  # the first of ``how`` slots
            slots = ", ".join(f"o[{k}]" if s == nr else "None" for s in range(how))
            out.append(f"bufs[p + {j + t}] = [{slots}]")
        else:
            at = f"p + {j + t}" if how == ADD else str(t)
            out += [
                f"x = bufs[{at}]",
                f"g = o[{k}]",
                f"y = x[{nr}]",
                f"if y is None: x[{nr}] = g",
                f"elif g is not None: x[{nr}] = y + g",
            ]
    return out


def code_lists(
    steps: Sequence[Any], lengths: tuple[int, ...], chunk: int, out: list[list[Stretch | None]]
) -> Iterator[None]:
    """Per start position, the function of the stretch of each length, into ``out``.

    Yields every ``chunk`` positions.  The Steps are shared tuples (equal
    ones are one object), so a stretch is named by its Steps' identities:
    C-level passes name every position's stretch, and only the distinct
    ones are looked up by value (``compiled``).
    """
    ids = array("q", map(id, steps))
    total = len(ids)
    yield
    for length in lengths:
        keys: list[tuple[int, ...]] = []
        # the stretch starting at each position, as its Steps' ids (none past the end)
        for a in range(0, total, chunk):
            b = min(a + chunk, total - length + 1)
            if b > a:
                keys += zip(*(ids[a + j : b + j] for j in range(length)))
            yield
        by_key: dict[tuple[int, ...], Stretch | None] = {}
        for a in range(0, len(keys), chunk):
            for key in set(keys[a : a + chunk]).difference(by_key):
                s = keys.index(key, a)
                by_key[key] = compiled(tuple(steps[s : s + length]))
            yield
        fns: list[Stretch | None] = []
        for a in range(0, len(keys), chunk):
            fns += map(by_key.__getitem__, keys[a : a + chunk])
            yield
        fns += [None] * (total - len(fns))
        out.append(fns)


def long_codes(steps: Sequence[Any], chunk: int, out: dict[int, Stretch]) -> Iterator[None]:
    """The functions of the runs of LONG nodes at LONG_AT + k * LONG, into ``out``.

    Only where one can be made (no general-path node); yields every
    ``chunk`` runs.  As ``code_lists``, by the Steps' identities.
    """
    ids = array("q", map(id, steps))
    starts = range(LONG_AT, len(ids) - LONG + 1, LONG)
    keys = list(zip(*(ids[LONG_AT + j :: LONG] for j in range(LONG))))[: len(starts)]
    yield
    by_key: dict[tuple[int, ...], Stretch | None] = {}
    for a in range(0, len(keys), chunk):
        for k in range(a, min(a + chunk, len(keys))):
            fn = by_key.get(keys[k], by_key)
            if fn is by_key:
                s = starts[k]
                fn = by_key[keys[k]] = compiled(tuple(steps[s : s + LONG]))
            if fn is not None:
                out[starts[k]] = fn  # type: ignore[assignment]
        yield
