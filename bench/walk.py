"""``python -m bench.walk``: the path of one gradient through aengine's code.

A warm ``await ae.grad`` of ``(sin(x) * w).sum()`` (3 elements, its
structure seen before) is traced with ``sys.setprofile`` (the shortest of
five traced calls); every call of a function in aengine's files is
counted, with the files it crosses and the jumps from one file to the next.  What it measures is how far a reader
must follow one backward, and how many Python calls the engine spends on
a small one (docs/performance.md, "The walk of one gradient").

    python -m bench.walk                 # asyncio; the counts
    python -m bench.walk --trio --list   # trio; each call, in order
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "walk"]


def walk(backend: str = "asyncio", warm: int = 3, tries: int = 5) -> list[tuple[str, str]]:
    """(file, function) of every call into aengine's code during one awaited backward.

    The shortest of ``tries`` traced calls: a call whose end checkpoint
    yields to the loop (more than a time slice since its task last yielded
    in the engine: NOTE [The checkpoint of a short backward]) resumes its
    chain of awaiting frames three more times, which the profile counts as
    calls; the shortest is the one that only checked for cancellation.
    """
    import anyio

    import aengine as ae

    root = str(Path(ae.__file__).parent)
    x = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = ae.tensor([0.5, 0.5, 0.5], requires_grad=True)
    best: list[tuple[str, str]] | None = None

    async def run() -> None:
        nonlocal best
        for _ in range(warm):  # imports, caches, the plan's key seen
            await ae.grad((ae.sin(x) * w).sum(), [x])
        for _ in range(tries):
            calls: list[tuple[str, str]] = []

            def seen(frame: Any, event: str, arg: Any) -> None:
                name = frame.f_code.co_filename
                if event == "call" and name.startswith(root):
                    calls.append((name[len(root) + 1 :], frame.f_code.co_name))

            loss = (ae.sin(x) * w).sum()
            sys.setprofile(seen)
            try:
                await ae.grad(loss, [x])
            finally:
                sys.setprofile(None)
            if best is None or len(calls) < len(best):
                best = calls

    anyio.run(run, backend=backend)
    assert best is not None
    return best


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.walk", description=__doc__)
    p.add_argument("--trio", action="store_true", help="under trio (default: asyncio)")
    p.add_argument("--list", action="store_true", help="print each call")
    args = p.parse_args(argv)
    calls = walk("trio" if args.trio else "asyncio")
    files = [f for f, _ in calls]
    jumps = sum(a != b for a, b in zip(files, files[1:], strict=False))
    if args.list:
        for f, fn in calls:
            print(f"{f:28} {fn}")
        print()
    print(f"{len(calls)} calls, {len(set(files))} files, {jumps} jumps between files")


if __name__ == "__main__":
    main()
