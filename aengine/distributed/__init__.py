"""Beyond one process: process groups, GradSync and distributed backward.

``local_groups`` makes in-process ranks (tasks of one event loop: tests,
``latency`` for a simulated network); ``ray_groups`` makes ranks whose
messages go through Ray actors (the ``ray`` extra).  ``GradSync`` averages
gradients over the ranks while the backward runs; ``context`` and ``rpc``
run a model split across ranks and its backward.  See docs/distributed.md.
"""

from ._gradsync import GradSync
from ._group import ProcessGroup, RankFailedError, Work
from ._local import LocalGroup, local_groups
from ._ray import RayGroup, ray_groups
from ._rpc import DistContext, RemoteError, context, current_context, rpc, serve

__all__ = [
    "DistContext",
    "GradSync",
    "LocalGroup",
    "ProcessGroup",
    "RankFailedError",
    "RayGroup",
    "RemoteError",
    "Work",
    "context",
    "current_context",
    "local_groups",
    "ray_groups",
    "rpc",
    "serve",
]
