"""The layers' seams: what one layer hands another stays in step with it."""

from __future__ import annotations

import ast
from pathlib import Path

import aengine as ae
from aengine.core import Node, TensorBase
from aengine.tensors import Tensor
from aengine.tensors._fields import TensorFields

PACKAGE = Path(ae.__file__).parent


def _slots(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "__slots__", ()))
    return names - {"__dict__", "__weakref__"}


def test_record_builds_tensors_as_tensor_make_does() -> None:
    """``record`` inlines ``Tensor._make``: a field added to one must be added to both."""
    made = Tensor._make(ae.ones(2).data, True, ae.device("cpu"))
    recorded = ae.ones(2, requires_grad=True) * 2
    for t in (made, recorded):
        assert all(hasattr(t, name) for name in _slots(TensorFields)), t
        assert vars(t) == {}  # cold fields stay at their class defaults
    assert _slots(Tensor) == _slots(TensorFields)


def test_record_builds_nodes_as_node_init_does() -> None:
    """``record`` inlines ``Node.__init__``: every slot it sets is set on a recorded node."""
    plain = Node((None,))
    node = (ae.ones(2, requires_grad=True) * 2).grad_fn
    set_by_init = {name for name in _slots(Node) if hasattr(plain, name)}
    assert set_by_init == {"next_nodes", "next_nrs", "sequence_nr", "topological_nr", "_special"}
    assert all(hasattr(node, name) for name in set_by_init)
    # the facts the runtime decides from (NOTE [Where a node runs])
    assert node.dev == ae.device("cpu") and node.numel == 2


def test_the_core_knows_tensors_only_through_tensor_base() -> None:
    assert issubclass(Tensor, TensorBase)
    from aengine.core._graph import _bound

    assert _bound.tensor is Tensor and _bound.host is ae.device("cpu")


def _local_imports(path: Path) -> list[tuple[int, str]]:
    """Imports inside functions, with the line above them (the reason)."""
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found.append((node.lineno, lines[node.lineno - 2].strip()))
    return found


def test_every_function_local_import_says_why() -> None:
    """A function-local import carries a comment on the line above it."""
    missing = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, above in _local_imports(path)
        if not above.startswith("#")
    ]
    assert missing == []
