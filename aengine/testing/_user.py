"""Choice points and faults in user code: ``ae.testing.choice`` and ``ae.testing.buggify``."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, TypeVar

from ..runtime._share import loop_share
from ._threads import current_baton

__all__ = ["buggify", "choice", "pick"]

T = TypeVar("T")


class _Done:
    """An awaitable that completes at once (a choice point outside an explored run)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator: awaiting it does not suspend


_DONE = _Done()


def choice(name: str = "") -> Any:
    """A choice point in user code: ``await ae.testing.choice("after the read")``.

    In an explored run the explorer decides here whether other tasks run
    first, and whether time passes (a boundary, NOTE [Choice points]); in a
    compute thread of an explored run, call it without ``await``: the thread
    stops here until the explorer lets it go on.  Outside ``explore`` it
    does nothing and costs one attribute read.  ``name`` is shown in a
    failure's interleaving.

    Example::

        >>> import aengine as ae, anyio
        >>> async def read_then_write(box):
        ...     seen = box["n"]
        ...     await ae.testing.choice("between the read and the write")
        ...     box["n"] = seen + 1
        >>> box = {"n": 0}
        >>> anyio.run(read_then_write, box)
        >>> box["n"]
        1
    """
    if not isinstance(name, str):
        raise TypeError(f"ae.testing.choice(name) takes a str name, got {type(name).__name__}")
    baton = current_baton()
    if baton is not None:
        baton.pause()  # NOTE [Threads under the explorer]
        return _DONE
    choices = loop_share().choices
    if choices is None:
        return _DONE
    return choices.user_choice(name)


def buggify(p: float = 0.1) -> bool:
    """True, now and then, in an explored run: take the rare path here (FoundationDB's BUGGIFY).

    ``if ae.testing.buggify(): raise ConnectionError(...)`` makes a fault a
    choice of the explorer: drawn with probability ``p`` by ``random`` and
    ``pct``, enumerated by ``exhaustive`` (as one deviation), recorded and
    replayed like any choice.  Outside ``explore`` it is always False.

    Example::

        >>> import aengine as ae
        >>> ae.testing.buggify()
        False
    """
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
        raise ValueError(f"buggify(p): p is a probability in [0, 1], got {p!r}")
    baton = current_baton()
    choices = baton.choices if baton is not None else loop_share().choices
    if choices is None:
        return False
    return choices.fault(float(p), "buggify")


def pick(options: Sequence[T], name: str = "") -> T:
    """One of ``options``, chosen by the explorer: seeded sequences of actions for a service test.

    ``random`` draws it uniformly, ``pct`` and ``exhaustive`` take the first
    and enumerate the others (each one deviation), and a replay picks the
    same; outside ``explore`` it is always ``options[0]``.  A loop of picks
    makes a seeded scenario: which request arrives next, whether a client
    retries or times out.

    Example::

        >>> import aengine as ae
        >>> ae.testing.pick(["request", "retry", "timeout"])
        'request'
    """
    if not isinstance(options, Sequence) or isinstance(options, str) or not options:
        raise ValueError(
            f"ae.testing.pick(options) takes a non-empty sequence (a list or tuple), got {options!r}"
        )
    baton = current_baton()
    choices = baton.choices if baton is not None else loop_share().choices
    if choices is None or len(options) < 2:
        return options[0]
    return options[choices.user_pick(len(options), name or "pick", [repr(o) for o in options])]
