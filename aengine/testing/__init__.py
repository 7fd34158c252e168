"""Explored, replayable and shrunk schedules of concurrent code (see docs/testing.md).

``explore(fn)`` runs ``async fn()`` once per seed; every scheduling choice
aengine makes in a run comes from the strategy (``random``, ``pct``,
``exhaustive``, ``coverage``), time is virtual and advances with compute,
and the first failing run is shrunk and raises ``ScheduleFailure`` with the
schedule string that ``replay(fn, schedule)`` reproduces exactly.
``choice()`` and ``buggify()`` add choice points and faults in user code.

Example::

    >>> import aengine as ae
    >>> async def step():
    ...     x = ae.ones(3, requires_grad=True)
    ...     await (x * x).sum().backward()
    ...     assert x.grad.tolist() == [2.0, 2.0, 2.0]
    >>> ae.testing.explore(step, seeds=3, backend="trio").runs
    3
"""

from ..runtime._choice import Faults as Faults
from ..runtime._choice import InjectedFault as InjectedFault
from ..runtime._choice import ScheduleMismatch as ScheduleMismatch
from ._explore import ExploreReport as ExploreReport
from ._explore import explore as explore
from ._explore import replay as replay
from ._explore import trace as trace
from ._failure import ScheduleFailure as ScheduleFailure
from ._run import RunTimeout as RunTimeout
from ._search import PctBound as PctBound
from ._user import buggify as buggify
from ._user import choice as choice
from ._user import pick as pick

__all__ = [
    "ExploreReport",
    "Faults",
    "InjectedFault",
    "PctBound",
    "RunTimeout",
    "ScheduleFailure",
    "ScheduleMismatch",
    "buggify",
    "choice",
    "explore",
    "pick",
    "replay",
    "trace",
]
