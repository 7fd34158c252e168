"""``EngineStats``: what an Engine has done since it opened (``engine.stats()``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["EngineStats"]


@dataclass(frozen=True)
class EngineStats:
    """What an Engine has done since it opened (``engine.stats()``).

    * ``backwards_done``, ``backwards_failed``, ``backwards_cancelled``:
      top-level backwards (``await ae.backward/grad`` and the other entry
      points; nested ones belong to their parent) ended each way; one
      cancelled while it waited for admission counts as cancelled.
    * ``backwards_inflight``: admitted and running; ``backwards_waiting``:
      waiting for admission (``max_inflight``).
    * ``queue_depth``: by device, the work waiting: for ``"cpu"`` the
      backwards waiting for their turn on the event loop (NOTE [The loop's
      share]), for other devices the nodes in their queue.
    * ``kernels_offloaded``: node kernels run in compute threads;
      ``backwards_in_threads``: backwards whose nodes moved to a compute
      thread (``offload_backward``); ``calls_run``: functions run by
      ``engine.run``.
    * ``slices``: time slices run by backwards on this loop;
      ``slices_overran``: those that lasted more than twice ``time_slice``
      (a single node longer than that cannot be cut).
    * ``worst_loop_lag``: the latest a 10 ms timer of the loop fired, in
      seconds: how long the event loop was kept from other tasks at worst.
    * ``blas_threads``: the BLAS/OpenMP thread cap in force (None: none).

    Example::

        >>> import aengine as ae, anyio
        >>> async def main():
        ...     async with ae.Engine() as engine:
        ...         x = ae.ones(3, requires_grad=True)
        ...         await ae.grad(x.sum(), [x])
        ...         return engine.stats()
        >>> anyio.run(main).backwards_done
        1
    """

    backwards_done: int = 0
    backwards_failed: int = 0
    backwards_cancelled: int = 0
    backwards_inflight: int = 0
    backwards_waiting: int = 0
    queue_depth: dict[str, int] = field(default_factory=dict)
    kernels_offloaded: int = 0
    backwards_in_threads: int = 0
    calls_run: int = 0
    slices: int = 0
    slices_overran: int = 0
    worst_loop_lag: float = 0.0
    blas_threads: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The figures as a plain dict (JSON-ready)."""
        return asdict(self)
