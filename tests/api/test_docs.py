"""Every ```python block in README.md and docs/*.md runs, and every docstring example.

Blocks of one page run in order in one namespace (a page reads as one
session).  A block that uses top-level ``await`` runs as the body of an async
function, once under asyncio and once under trio; the others run as plain
code.  A block whose first
line is ``# not run`` is skipped (for sketches that need a web server, etc.).
"""

from __future__ import annotations

import doctest
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import anyio
import pytest

import aengine as ae
from tests.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(page: pathlib.Path) -> list[str]:
    return [b for b in BLOCK.findall(page.read_text()) if not b.startswith("# not run")]


def _uses_await(src: str) -> bool:
    try:
        compile(src, "<page>", "exec")
    except SyntaxError:
        return "await " in src or "async with" in src or "async for" in src
    return False


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: p.name)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_page_examples_run(page: pathlib.Path, backend: str) -> None:
    blocks = _blocks(page)
    if not blocks:
        pytest.skip(f"{page.name} has no python examples")
    if backend == "trio" and not any(_uses_await(b) for b in blocks):
        pytest.skip("no async example on this page: run once")
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for i, src in enumerate(blocks):
        where = f"{page.name} block {i + 1}"
        if not _uses_await(src):
            exec(compile(src, where, "exec"), namespace)
            continue
        # an async block runs as the body of a coroutine; its names flow back
        body = textwrap.indent(src + "\n__names__ = dict(locals())", "    ")
        exec(
            compile(f"async def __block__():\n{body}\n    return __names__\n", where, "exec"),
            namespace,
        )
        names = anyio.run(namespace["__block__"], backend=backend)  # type: ignore[arg-type]
        namespace.update(names)


#: the public namespaces below ``ae.`` whose objects' examples run too
_NAMESPACES = [
    "linalg", "nn", "nn.functional", "nn.init", "nn.utils", "optim", "optim.lr_scheduler",
]  # fmt: skip


def _public_objects() -> list[tuple[str, object]]:
    objs = []
    for name in ae.__all__:
        obj = getattr(ae, name)
        if callable(obj) or isinstance(obj, type):
            objs.append((name, obj))
    for ns in _NAMESPACES:
        mod: object = ae
        for part in ns.split("."):
            mod = getattr(mod, part)
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if (callable(obj) or isinstance(obj, type)) and not isinstance(obj, type(ae)):
                objs.append((f"{ns}.{name}", obj))
    return objs


@pytest.mark.parametrize(
    "name,obj", _public_objects(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_docstring_examples(name: str, obj: object) -> None:
    if not getattr(obj, "__doc__", None):
        pytest.fail(f"ae.{name} has no docstring")
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(obj, name, globs={"ae": ae}):
        result = runner.run(test)
        assert result.failed == 0, f"docstring example of ae.{name} failed"


def test_the_readme_first_example_runs_pasted_into_a_script(tmp_path: pathlib.Path) -> None:
    """Not as the body of an async function (as test_page_examples_run may): as a file."""
    first = _blocks(ROOT / "README.md")[0]
    script = tmp_path / "first.py"
    script.write_text(first)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tensor("), done.stdout


def test_the_api_reference_shows_what_awaiting_an_entry_point_gives() -> None:
    """griffe (mkdocstrings) with the site's extension: ``ae.grad`` reads as returning the
    gradients, not as the generator it is made from (docs/_griffe/runtime_docstrings.py)."""
    griffe = pytest.importorskip("griffe", reason="griffe (the docs extra) is not installed")
    ext = griffe.load_extensions(f"{ROOT}/docs/_griffe/runtime_docstrings.py:RuntimeDocstrings")
    pkg = griffe.load(
        "aengine",
        search_paths=[str(ROOT), *sys.path],
        force_inspection=True,
        extensions=ext,
        resolve_aliases=False,
    )
    expected = {
        "grad": "tuple[Tensor | None, ...]",
        "backward": "None",
        "gradcheck": "bool",
        "sync.grad": "tuple[Tensor | None, ...]",
        "sync.backward": "None",
    }
    for path, result in expected.items():
        member = pkg[path]
        fn = member.final_target if member.is_alias else member
        assert str(fn.returns) == result, f"ae.{path} shows -> {fn.returns}"
        assert fn.docstring is not None and fn.docstring.value, f"ae.{path} has no docstring"
