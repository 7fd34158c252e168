"""The layers' seams: what one layer hands another stays in step with it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import aengine as ae
from aengine.core import Node, TensorBase
from aengine.tensors import Tensor
from aengine.tensors._fields import TensorFields
from tests.oracle import torch_or_skip

PACKAGE = Path(ae.__file__).parent


def _slots(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "__slots__", ()))
    return names - {"__dict__", "__weakref__"}


def test_record_builds_tensors_as_tensor_make_does() -> None:
    """``record`` and ``record_one`` inline ``Tensor._make``: a field added to one must be added to all."""
    made = Tensor._make(ae.ones(2).data, True, ae.device("cpu"))
    x = ae.ones(2, requires_grad=True)
    by_record_one = x * 2
    by_record = x * by_record_one  # two tensors
    assert by_record.grad_fn.next_functions[1][0] is by_record_one.grad_fn
    for t in (made, by_record_one, by_record):
        assert all(hasattr(t, name) for name in _slots(TensorFields)), t
        assert vars(t) == {}  # cold fields stay at their class defaults
    assert _slots(Tensor) == _slots(TensorFields)


def test_record_builds_nodes_as_node_init_does() -> None:
    """``record`` inlines ``Node.__init__``: every slot it sets is set on a recorded node."""
    plain = Node((None,))
    node = (ae.ones(2, requires_grad=True) * 2).grad_fn
    set_by_init = {name for name in _slots(Node) if hasattr(plain, name)}
    assert set_by_init == {"next_nrs", "sequence_nr", "topological_nr", "_special"}
    assert all(hasattr(node, name) for name in set_by_init)
    # the node is the list of its next nodes, one per input (NOTE [A node is
    # the list of its next nodes]), as Node.__init__ makes it
    assert len(plain) == len(plain.next_nrs) == 1 and plain[0] is None
    assert len(node) == len(node.next_nrs) == 2 and node[1] is None
    assert node[0] is node.next_functions[0][0] is not None
    # the facts the runtime decides from (NOTE [Where a node runs])
    assert node.dev == ae.device("cpu") and node.numel == 2


def _node_fields(t: Tensor) -> dict[str, object]:
    """What a recorded result and its node hold, by value (identity for graph objects)."""
    node = t._fn
    assert node is not None
    fields: dict[str, object] = {"class": type(node), "next": [id(n) for n in node]}
    for name in sorted(_slots(type(node)) - {"sequence_nr"}):
        value = getattr(node, name)
        if name == "saved" and value.__class__ is not Tensor and value != ():
            value = (value.data is t.data, value.version, value.is_output)  # a saved output
        elif name in ("saved", "dev"):
            value = id(value)
        fields[name] = value
    for name in _slots(TensorFields):
        value = getattr(t, name)
        fields["t." + name] = value if name in ("_rg", "output_nr", "_vc") else type(value)
    return fields


@pytest.mark.parametrize(
    "case",
    ["unary saves its input", "unary saves its output", "tensor and number", "promotes", "view"],
)
@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "non-leaf"])
def test_record_one_builds_the_node_that_record_builds(case: str, leaf: bool) -> None:
    """NOTE [Recording an op of one tensor]: both paths agree field by field."""
    from aengine.ops._arith import MulScalarBackward
    from aengine.ops._core import record, record_one
    from aengine.ops._shape import ViewBackward0
    from aengine.ops._unary import exp, sin

    base = ae.ones(2, 3, dtype=ae.float32, requires_grad=True)
    x = base if leaf else base * 1.5
    if case == "view":
        x = x[0]
    dev = x._device
    sin_cls, exp_cls = sin(x).grad_fn.__class__, exp(x).grad_fn.__class__
    data = x.data * 2 if case != "promotes" else (x.data * 2).astype("float64")
    calls = {
        "unary saves its input": (
            lambda: record(sin_cls, data, dev, (x,), (x,)),
            lambda: record_one(sin_cls, data, dev, x, 1, None, True, False),
        ),
        "unary saves its output": (
            lambda: record(exp_cls, data, dev, (x,), save_output=True),
            lambda: record_one(exp_cls, data, dev, x, 1, save_output=True),
        ),
        "tensor and number": (
            lambda: record(MulScalarBackward, data, dev, (x, 2.0), attrs=2.0),
            lambda: record_one(MulScalarBackward, data, dev, x, 2, attrs=2.0),
        ),
        "promotes": (
            lambda: record(MulScalarBackward, data, dev, (x, 2.0), attrs=2.0, bcast=True),
            lambda: record_one(MulScalarBackward, data, dev, x, 2, attrs=2.0, bcast=True),
        ),
        "view": (
            lambda: record(ViewBackward0, data, dev, (x,), attrs=x.data.shape),
            lambda: record_one(ViewBackward0, data, dev, x, 1, x.data.shape),
        ),
    }
    by_record, by_record_one = (call() for call in calls[case])
    assert _node_fields(by_record) == _node_fields(by_record_one)
    assert by_record_one.grad_fn.sequence_nr == by_record.grad_fn.sequence_nr + 1
    with ae.no_grad():
        assert calls[case][1]().grad_fn is None
    with ae.inference_mode():
        frozen = ae.ones(2, 3, dtype=ae.float32)
    assert record_one(sin_cls, frozen.data, dev, frozen).grad_fn is None  # (as record's)
    assert record(sin_cls, frozen.data, dev, (frozen,)).grad_fn is None


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


def _declared_methods() -> list[ast.FunctionDef]:
    """The methods declared for type checkers in Tensor's ``if TYPE_CHECKING:`` block."""
    tree = ast.parse((PACKAGE / "tensors" / "_tensor.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    blocks = [
        n for n in cls.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1
    return [n for n in blocks[0].body if isinstance(n, ast.FunctionDef)]


def _declared_parameters(fn: ast.FunctionDef) -> list[tuple[str, str]]:
    """(name, kind) of each parameter after ``self``, kinds as ``inspect.Parameter`` names them."""
    a = fn.args
    params = [(p.arg, "POSITIONAL_ONLY") for p in a.posonlyargs]
    params += [(p.arg, "POSITIONAL_OR_KEYWORD") for p in a.args]
    if a.vararg is not None:
        params.append((a.vararg.arg, "VAR_POSITIONAL"))
    params += [(p.arg, "KEYWORD_ONLY") for p in a.kwonlyargs]
    if a.kwarg is not None:
        params.append((a.kwarg.arg, "VAR_KEYWORD"))
    return params[1:]


def test_tensor_methods_match_their_type_checking_declarations() -> None:
    """The functions ops/_methods.py attaches take the parameters _tensor.py declares.

    mypy reads the declarations, the run time calls the attached functions: a
    parameter named differently (``x.add(other=y)`` declared, ``add(a, b)``
    attached) passes the type checker and fails at run time.
    """
    declared = _declared_methods()
    assert len(declared) > 100  # the block was found and parsed
    drift = []
    for fn in declared:
        if any(ast.unparse(d) == "property" for d in fn.decorator_list):
            assert isinstance(inspect.getattr_static(Tensor, fn.name), property), fn.name
            continue
        method = getattr(Tensor, fn.name, None)
        if method is None:
            drift.append(f"{fn.name}: declared, not attached")
            continue
        params = list(inspect.signature(method).parameters.values())[1:]
        attached = [(p.name, p.kind.name) for p in params]
        if attached != _declared_parameters(fn):
            drift.append(f"{fn.name}: declared {_declared_parameters(fn)}, attached {attached}")
    assert drift == []


#: (method, its second parameter's name in PyTorch): callable by keyword in both
KEYWORD_CALLS = [
    ("add", "other"), ("sub", "other"), ("mul", "other"), ("div", "other"), ("pow", "exponent"),
    ("maximum", "other"), ("minimum", "other"), ("matmul", "other"), ("dot", "tensor"),
    ("eq", "other"), ("ne", "other"), ("lt", "other"), ("le", "other"), ("gt", "other"),
    ("ge", "other"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "name"), KEYWORD_CALLS)
def test_binary_methods_take_pytorchs_parameter_names(method: str, name: str) -> None:
    torch = torch_or_skip()
    a, b = [1.0, 2.0, 3.0], [3.0, 2.0, 1.0]
    got = getattr(ae.tensor(a), method)(**{name: ae.tensor(b)})
    want = getattr(torch.tensor(a), method)(**{name: torch.tensor(b)})
    assert got.tolist() == want.tolist()
    # positional use is unchanged
    assert getattr(ae.tensor(a), method)(ae.tensor(b)).tolist() == want.tolist()


def test_functions_and_operators_take_pytorchs_parameter_names() -> None:
    torch = torch_or_skip()
    m = [[1.0, 2.0], [3.0, 4.0]]
    assert ae.ones(2, 2).mm(mat2=ae.tensor(m)).tolist() == (
        torch.ones(2, 2).mm(mat2=torch.tensor(m)).tolist()
    )
    x, tx = ae.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert ae.pow(x, exponent=3).tolist() == torch.pow(tx, exponent=3).tolist()
    assert ae.logical_and(x, other=x > 1).tolist() == torch.logical_and(tx, other=tx > 1).tolist()
    # the reflected operators (a scalar on the left) are unchanged
    assert (2 - x).tolist() == [1.0, 0.0] and (2 / x).tolist() == [2.0, 1.0]
    assert (2**x).tolist() == [2.0, 4.0] and (1 + x).tolist() == [2.0, 3.0]


def test_the_engines_parts_import_nothing_of_the_engine() -> None:
    """runtime/_workers, _lifetime and _calls see the Engine through Protocols of their own:
    not even an annotation-only import of _engine.py (that would be an import cycle)."""
    for name in ("_workers", "_lifetime", "_calls"):
        tree = ast.parse((PACKAGE / "runtime" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "_engine" and node.level == 1:
                raise AssertionError(f"runtime/{name}.py imports _engine (line {node.lineno})")
