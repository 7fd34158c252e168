"""The strategies of ``explore``: which choices each run gets, from the runs before it.

# NOTE [Exhaustive search]
# ``exhaustive`` enumerates every schedule with at most ``preemption_bound``
# answers other than 0 (delay bounding: Emmi, Qadeer and Rakamaric, POPL
# 2011; a preemption bound in the sense of CHESS and Loom, counted over
# every question), depth first.  A schedule is a prefix of answers, 0
# after it.  Running prefix P records the questions the run asked and how
# many answers each had; its children are P's log cut at each position i
# at or after P's end, with one other answer there: so every schedule is
# reached once, by the run of its prefix up to its last answer other than
# 0.  Children are made only below the bound.  The frontier (the prefixes
# still to run) is the whole state of the search: saved every 10 runs and
# when the search stops to ``state`` when given, a later ``explore`` with the same file resumes it.
# Equivalent answers are never offered (NOTE [Choice points]), which is
# what keeps the frontier small: a boundary where no other task can run and
# no timer is due is no question.

# NOTE [PCT's guarantee]
# PCT (Burckhardt, Kothari, Musuvathi, Nagarakatte, "A Randomized Scheduler
# with Probabilistic Guarantees of Finding Bugs", ASPLOS 2010) gives each of
# the n tasks a random priority, always favours the highest, and at d - 1
# change points drawn among the k steps of a run lowers the running task's
# priority below all others.  A bug of depth d, one that shows whenever d
# particular ordering constraints hold, is then found by one run with
# probability at least 1 / (n * k^(d-1)).  Here a step is a boundary
# question (NOTE [Choice points]), a change point preempts the running
# task there (it yields, or the clock jumps to the next timer), and picks
# between waiters follow the priorities; k is the number of boundary
# questions of the longest run so far (the first run is the usual policy's,
# with no change point), n the number of tasks that asked.  The guarantee
# holds for bugs whose constraints are preemptions at these boundaries and
# an order of picks: not for orders the explorer does not control (trio's
# shuffle of a batch of tasks, code between two choice points).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..runtime._choice import Choices, Faults

__all__ = ["Exhaustive", "PctBound", "Pct", "Seeded"]


@dataclass(frozen=True)
class PctBound:
    """PCT's figures for an exploration (NOTE [PCT's guarantee]).

    ``bound``: the least probability that one run finds a bug of depth
    ``depth``, with ``tasks`` tasks and ``steps`` boundary steps a run:
    ``1 / (tasks * steps ** (depth - 1))``.

    Example::

        >>> import aengine as ae
        >>> ae.testing.PctBound(depth=2, steps=15, tasks=3).bound == 1 / 45
        True
    """

    depth: int
    steps: int
    tasks: int

    @property
    def bound(self) -> float:
        return 1.0 / float(max(self.tasks, 1) * max(self.steps, 1) ** (self.depth - 1))


class Seeded:
    """``random`` and ``coverage``: one run per seed, each choice drawn from the seed."""

    def __init__(self, seeds: list[int], strategy: str, faults: Faults | None, ct: float) -> None:
        self.seeds = iter(seeds)
        self.strategy = strategy
        self.faults = faults
        self.ct = ct

    def next(self) -> Choices | None:
        seed = next(self.seeds, None)
        if seed is None:
            return None
        return Choices(seed, "random", faults=self.faults, compute_time=self.ct)

    def ran(self, choices: Choices) -> None:
        pass


class Pct:
    """``pct``: the usual policy's run first (to count steps), then one PCT run per seed."""

    def __init__(self, seeds: list[int], depth: int, faults: Faults | None, ct: float) -> None:
        self.seeds = iter(seeds)
        self.depth = depth
        self.faults = faults
        self.ct = ct
        self.steps = 0
        self.tasks = 0
        self.first = True

    def next(self) -> Choices | None:
        if self.first:
            self.first = False
            return Choices(0, "pct", replay=[], faults=self.faults, compute_time=self.ct)
        seed = next(self.seeds, None)
        if seed is None:
            return None
        return Choices(
            seed,
            "pct",
            faults=self.faults,
            pct_depth=self.depth,
            pct_steps=max(self.steps, 1),
            compute_time=self.ct,
        )

    def ran(self, choices: Choices) -> None:
        self.steps = max(self.steps, choices.boundaries)
        self.tasks = max(self.tasks, len(choices._tasks))

    def figures(self) -> PctBound:
        return PctBound(self.depth, self.steps, self.tasks)


class Exhaustive:
    """``exhaustive``: depth first over schedules with at most ``bound`` preemptions (NOTE [Exhaustive search])."""

    def __init__(
        self,
        bound: int,
        budget: int,
        faults: Faults | None,
        ct: float,
        state: Path | None,
        backend: str,
    ) -> None:
        self.bound = bound
        self.budget = budget
        self.faults = faults
        self.ct = ct
        self.state = state
        self.backend = backend
        self.frontier: list[list[int]] = [[]]
        self.done = 0
        self.runs = 0
        if state is not None:
            self._load(state)
        self._current: list[int] = []

    @property
    def complete(self) -> bool:
        return not self.frontier

    def next(self) -> Choices | None:
        if not self.frontier or self.runs >= self.budget:
            return None
        self._current = self.frontier.pop()
        self.runs += 1
        return Choices(
            0, "exhaustive", replay=self._current, faults=self.faults, compute_time=self.ct
        )

    def ran(self, choices: Choices) -> None:
        prefix = self._current
        log, steps = choices.log, choices.steps
        self.done += 1
        if sum(1 for v in prefix if v) < self.bound:
            children: list[list[int]] = []
            for i in range(len(prefix), len(log)):
                n = steps[i].n if i < len(steps) else 1
                children.extend([*log[:i], v] for v in range(1, n))
            self.frontier.extend(reversed(children))  # the earliest position runs first
        if self.state is not None and (self.done % 10 == 0 or not self.frontier):
            self.save()

    def save(self) -> None:
        """Write the frontier to the state file (every 10 runs, and when the search stops)."""
        if self.state is not None:
            self._save(self.state)

    # -- the saved state ----------------------------------------------------------------------
    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"the exhaustive search's state at {str(path)!r} is not readable JSON ({exc})"
            ) from None
        mine = data.get(self.backend) if isinstance(data, dict) else None
        if not isinstance(mine, dict):
            return
        if mine.get("preemption_bound") != self.bound:
            raise ValueError(
                f"the exhaustive search saved at {str(path)!r} ran with preemption_bound="
                f"{mine.get('preemption_bound')}, not {self.bound}: pass that bound to resume it, "
                "or another state file"
            )
        self.frontier = [list(map(int, p)) for p in mine.get("frontier", [])]
        self.done = int(mine.get("runs", 0))

    def _save(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                data = {}
        except (OSError, ValueError):
            data = {}
        data[self.backend] = {
            "preemption_bound": self.bound,
            "runs": self.done,
            "frontier": self.frontier,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
