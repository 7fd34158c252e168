"""Shrinking a failing schedule, and showing it as a readable interleaving.

# NOTE [Shrinking]
# A failing run's log is the answer to every question it asked.  Answers
# past the end of a replayed log are 0 (the usual policy), so a schedule is
# its log with the trailing zeros cut, and two measures say how small it
# is: its preemptions (answers other than 0 to preempting questions) and
# its steps (its length: the questions up to the last such answer).
# ``shrink`` replays edited logs, leniently (an answer that no longer fits
# its question is taken as 0), and keeps an edit when the run still fails
# with an error of the same type:
#
# 1. each answer other than 0, last to first, set to 0 (one preemption
#    fewer, and the schedule ends earlier when it was the last one);
# 2. each answer above 1 lowered (fewer timers expire, an earlier waiter).
#
# until neither edit helps, or ``budget`` replays ran.  Each kept edit
# re-records the log, so the result is a run that really happened and
# fails.  Greedy, as Hypothesis's shrinker is: a local minimum (no single
# preemption can be dropped), not always the global one.
"""

from __future__ import annotations

from collections.abc import Callable

from ..runtime._choice import PREEMPTING, Choices, Step

__all__ = ["interleaving", "preemptions_of", "shrink", "trimmed"]


def trimmed(log: list[int]) -> list[int]:
    """``log`` without its trailing zeros (they are what a replay answers anyway)."""
    end = len(log)
    while end and not log[end - 1]:
        end -= 1
    return log[:end]


def preemptions_of(steps: list[Step]) -> int:
    """The answers other than the usual policy's among ``steps``' preempting questions."""
    return sum(1 for s in steps if s.answer and s.kind in PREEMPTING)


def shrink(
    log: list[int], attempt: Callable[[list[int]], Choices | None], budget: int = 150
) -> Choices | None:
    """The smallest failing run found from ``log`` (NOTE [Shrinking]); None if it did not fail again.

    ``attempt(prefix)`` replays a prefix leniently and returns its choices
    if the run failed as the original did, else None.
    """
    best = attempt(trimmed(log))
    if best is None:
        return None
    runs = 1
    improved = True
    while improved and runs < budget:
        improved = False
        cur = trimmed(best.log)
        for i in range(len(cur) - 1, -1, -1):
            if runs >= budget:
                break
            if i >= len(cur) or not cur[i]:
                continue
            for v in range(cur[i] - 1, -1, -1) if cur[i] > 1 else (0,):
                cand = trimmed([*cur[:i], v, *cur[i + 1 :]])
                runs += 1
                got = attempt(cand)
                if got is not None and _smaller(got, best):
                    best, cur, improved = got, trimmed(got.log), True
                    break
                if v == 0 or runs >= budget:
                    break
    return best


def _smaller(a: Choices, b: Choices) -> bool:
    ka = (preemptions_of(a.steps), len(trimmed(a.log)), sum(a.log))
    kb = (preemptions_of(b.steps), len(trimmed(b.log)), sum(b.log))
    return ka < kb


def interleaving(steps: list[Step], upto: int, most: int = 40) -> str:
    """The first ``upto`` steps as lines: step, task, choice point, where, answer.

    Runs of steps that went on as usual are folded into one line.
    """
    lines: list[str] = []
    quiet: list[Step] = []

    def fold() -> None:
        if len(quiet) > 2:
            tasks = ", ".join(dict.fromkeys(s.task for s in quiet))
            lines.append(f"      ... {len(quiet)} choice points go on as usual ({tasks})")
        else:
            lines.extend(_line(s) for s in quiet)
        quiet.clear()

    for s in steps[:upto]:
        if s.answer:
            fold()
            lines.append(_line(s))
        else:
            quiet.append(s)
    fold()
    if len(lines) > most:
        lines = [*lines[: most - 1], f"      ... {len(lines) - most + 1} more lines"]
    return "\n".join(lines)


def _line(s: Step) -> str:
    mark = "->" if s.answer else "  "
    return f"  {mark} {s.task:<14} {s.kind:<7} {s.where:<38} {s.meaning}"
