"""ae.viz: the backward graph as Graphviz DOT text, and rendering it.

The DOT of small graphs is compared with expected text (node ids follow a
breadth-first walk, so the text is stable); every text is also parsed by a
small DOT reader here (and by Graphviz where it is installed), and the
graphs' node names and edges are compared with the same walk of PyTorch's
graph built by the same code.
"""

from __future__ import annotations

import doctest
import re
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import aengine as ae
import aengine.viz
from tests.oracle import torch_or_skip
from tests.paths import ROOT

HEADER = (
    "digraph backward {\n"
    "  node [shape=box, style=filled, fillcolor=lightgrey, fontname=monospace, fontsize=10];\n"
)


def dot(*lines: str) -> str:
    """Expected DOT text: the header, ``lines`` (indented), the closing brace."""
    return HEADER + "".join(f"  {line}\n" for line in lines) + "}\n"


# -- a small DOT reader: the syntax to_dot writes ---------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<id>[A-Za-z_][A-Za-z0-9_.]*|-?[0-9]+(?:\.[0-9]+)?)"
    r'|(?P<str>"(?:[^"\\\n]|\\.)*")|(?P<op>->|[{}\[\];,=]))'
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        assert m is not None and m.end() > pos, f"bad DOT at {text[pos : pos + 30]!r}"
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _unquote(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s[1:-1])


def parse_dot(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]]]:
    """``(nodes, edges)`` of a digraph; asserts the syntax and that each node is declared once."""
    toks = _tokens(text)
    i = 0

    def take(kind: str, value: str | None = None) -> str:
        nonlocal i
        assert i < len(toks), "DOT text ends early"
        k, v = toks[i]
        assert k == kind and (value is None or v == value), f"expected {value or kind}, got {v!r}"
        i += 1
        return v

    def attrs() -> dict[str, str]:
        nonlocal i
        out: dict[str, str] = {}
        if toks[i] != ("op", "["):
            return out
        take("op", "[")
        while True:
            key = take("id")
            take("op", "=")
            k, v = toks[i]
            assert k in ("id", "str"), f"bad attribute value {v!r}"
            i += 1
            out[key] = _unquote(v) if k == "str" else v
            if toks[i] == ("op", "]"):
                break
            take("op", ",")
        take("op", "]")
        return out

    take("id", "digraph")
    if toks[i][0] == "id":
        i += 1
    take("op", "{")
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    while toks[i] != ("op", "}"):
        name = take("id")
        if name in ("graph", "node", "edge"):
            attrs()
        elif toks[i] == ("op", "->"):
            take("op", "->")
            edges.append((name, take("id"), attrs()))
        else:
            assert name not in nodes, f"{name} declared twice"
            nodes[name] = attrs()
        take("op", ";")
    take("op", "}")
    assert i == len(toks), "text after the closing brace"
    for a, b, _ in edges:
        assert a in nodes and b in nodes, f"edge {a} -> {b} to an undeclared node"
    return nodes, edges


def to_dot(*args: Any, **kwargs: Any) -> str:
    """``ae.viz.to_dot``, its text checked by the reader (and Graphviz where present)."""
    text = ae.viz.to_dot(*args, **kwargs)
    parse_dot(text)
    graphviz = sys.modules.get("graphviz")
    if graphviz is not None and shutil.which("dot"):
        graphviz.Source(text).pipe(format="svg")
    return text


# -- graphs against expected text --------------------------------------------------------


def test_chain() -> None:
    x = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * 2.0).exp().sum()
    assert to_dot(y) == dot(
        'n0 [label="output\\n[] float32", fillcolor=darkolivegreen1];',
        "n0 -> n1;",
        'n1 [label="SumBackward0"];',
        "n1 -> n2;",
        'n2 [label="ExpBackward0"];',
        "n2 -> n3;",
        'n3 [label="MulBackward0"];',
        "n3 -> n4;",
        'n4 [label="[3] float32", fillcolor=lightblue];',
    )


def test_same_graph_same_text_and_no_object_ids() -> None:
    def build() -> ae.Tensor:
        x = ae.ones(2, 3, requires_grad=True)
        return (x.sin() * x.cos()).sum()

    a, b = to_dot(build()), to_dot(build())
    assert a == b
    assert "0x" not in a and not re.search(r"\d{6}", a)


def test_diamond_and_shared_leaf() -> None:
    # h feeds two branches that meet again: one node for h, one for x, an edge per use
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    h = x * x
    y = (h.sin() + h.cos()).sum()
    assert to_dot(y) == dot(
        'n0 [label="output\\n[] float64", fillcolor=darkolivegreen1];',
        "n0 -> n1;",
        'n1 [label="SumBackward0"];',
        "n1 -> n2;",
        'n2 [label="AddBackward0"];',
        "n2 -> n3;",
        "n2 -> n4;",
        'n3 [label="SinBackward0"];',
        "n3 -> n5;",
        'n4 [label="CosBackward0"];',
        "n4 -> n5;",
        'n5 [label="MulBackward0"];',
        "n5 -> n6;",
        "n5 -> n6;",
        'n6 [label="[2] float64", fillcolor=lightblue];',
    )


def test_multi_output_op_labels_its_edges_with_the_output() -> None:
    x = ae.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    a, b = ae.split(x, 2)
    y = (a * b).sum()
    assert to_dot(y) == dot(
        'n0 [label="output\\n[] float32", fillcolor=darkolivegreen1];',
        "n0 -> n1;",
        'n1 [label="SumBackward0"];',
        "n1 -> n2;",
        'n2 [label="MulBackward0"];',
        'n2 -> n3 [label="0"];',
        'n2 -> n3 [label="1"];',
        'n3 [label="SplitBackward0"];',
        "n3 -> n4;",
        'n4 [label="[4] float32", fillcolor=lightblue];',
    )
    # an output of the multi-output node: its edge names the output too
    assert 'n0 -> n1 [label="1"];' in to_dot(b)


class Cube(ae.Function):
    @staticmethod
    def forward(ctx: Any, x: ae.Tensor, k: float) -> ae.Tensor:
        y = x**3 * k
        ctx.k = k
        ctx.save_for_backward(x, None, y)
        return y

    @staticmethod
    def backward(ctx: Any, g: ae.Tensor) -> tuple[ae.Tensor, None]:
        x, _, _ = ctx.saved_tensors
        return g * 3.0 * x * x * ctx.k, None


def test_custom_function_and_its_saved_tensors() -> None:
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x.exp(), 2.0)
    assert to_dot(y) == dot(
        'n0 [label="output\\n[2] float32", fillcolor=darkolivegreen1];',
        "n0 -> n1;",
        'n1 [label="CubeBackward"];',
        "n1 -> n2;",
        'n2 [label="ExpBackward0"];',
        "n2 -> n3;",
        'n3 [label="[2] float32", fillcolor=lightblue];',
    )
    saved = (
        'n1 [label="CubeBackward\\nsaved 0: [2] float32\\nsaved 1: None'
        '\\nsaved 2: [2] float32 (output 0)"];'
    )
    assert saved in to_dot(y, show_saved=True)
    ae.sync.backward(y.sum())
    assert 'n1 [label="CubeBackward\\nsaved: freed"];' in to_dot(y, show_saved=True)


def test_params_name_leaves_and_outputs() -> None:
    w = ae.tensor([[1.0, 2.0]], requires_grad=True)
    b = ae.tensor([0.5], requires_grad=True)
    x = ae.ones(3, 2)
    y = (x @ w.T + b).relu().sum()
    expected = dot(
        'n0 [label="loss\\n[] float32", fillcolor=darkolivegreen1];',
        "n0 -> n1;",
        'n1 [label="SumBackward0"];',
        "n1 -> n2;",
        'n2 [label="ReluBackward0"];',
        "n2 -> n3;",
        'n3 [label="AddBackward0"];',
        "n3 -> n4;",
        "n3 -> n5;",
        'n4 [label="MmBackward0"];',
        "n4 -> n6;",
        'n5 [label="fc.bias\\n[1] float32", fillcolor=lightblue];',
        'n6 [label="PermuteBackward0"];',
        "n6 -> n7;",
        'n7 [label="fc.weight\\n[1, 2] float32", fillcolor=lightblue];',
    )
    names = {"fc.weight": w, "fc.bias": b, "loss": y}
    assert to_dot(y, params=names) == expected
    # named_parameters() style pairs (a generator), and a tensor named twice keeps its first name
    pairs = (p for p in [("fc.weight", w), ("fc.bias", b), ("loss", y), ("tied", w)])
    assert to_dot(y, params=pairs) == expected
    # a name not in the graph is harmless
    assert to_dot(y, params={"other": ae.ones(1)}) == to_dot(y)


def test_labels_are_escaped() -> None:
    w = ae.tensor([1.0], requires_grad=True)
    name = 'a "quoted"\\name\nline2'
    text = to_dot(w.exp(), params={name: w})
    assert 'n2 [label="a \\"quoted\\"\\\\name\\nline2\\n[1] float32", fillcolor=lightblue];' in text
    nodes, _ = parse_dot(text)
    assert nodes["n2"]["label"] == name + "\n[1] float32"

    class Weird(ae.Node):
        def name(self) -> str:
            return 'a\\b"c\r\nd'

    node = Weird(((w.grad_fn or w._grad_accumulator(), 0),))
    t = ae.ones(1)
    t._rg, t._fn = True, node
    nodes, _ = parse_dot(to_dot(t))
    assert nodes["n1"]["label"] == 'a\\b"c\nd'


def test_hooks_are_marked() -> None:
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()
    y = (h * 2.0).sum()
    h.register_hook(lambda g: None)
    h.grad_fn.register_prehook(lambda gs: None)
    h.grad_fn.register_hook(lambda gi, go: None)
    h.grad_fn.register_hook(lambda gi, go: None)
    x.register_hook(lambda g: None)
    x.register_post_accumulate_grad_hook(lambda t: None)
    y.retain_grad()
    y.register_hook(lambda g: None)
    assert to_dot(y) == dot(
        'n0 [label="output\\n[] float32\\nhooks: tensor 1, retain_grad 1", '
        "fillcolor=darkolivegreen1, peripheries=2];",
        "n0 -> n1;",
        'n1 [label="SumBackward0\\nhooks: tensor 1, retain_grad 1", peripheries=2];',
        "n1 -> n2;",
        'n2 [label="MulBackward0"];',
        "n2 -> n3;",
        'n3 [label="ExpBackward0\\nhooks: pre 1, post 2, tensor 1", peripheries=2];',
        "n3 -> n4;",
        'n4 [label="[2] float32\\nhooks: tensor 1, post_accumulate 1", '
        "fillcolor=lightblue, peripheries=2];",
    )


def test_hooks_of_the_accumulator_and_removed_hooks() -> None:
    x = ae.tensor([1.0], requires_grad=True)
    y = x.exp()
    acc = y.grad_fn.next_functions[0][0]
    acc.register_prehook(lambda gs: None)
    handle = acc.register_hook(lambda gi, go: None)
    assert (
        'n2 [label="[1] float32\\nhooks: pre 1, post 1", fillcolor=lightblue, peripheries=2];'
        in to_dot(y)
    )
    handle.remove()
    assert 'n2 [label="[1] float32\\nhooks: pre 1", fillcolor=lightblue, peripheries=2];' in to_dot(
        y
    )


def test_show_saved_before_and_after_a_backward() -> None:
    x = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = ae.tensor([0.5, 0.5, 0.5], requires_grad=True)
    y = ((x * w).exp() * 3.0).sum()
    before = dot(
        'n0 [label="output\\n[] float32", fillcolor=darkolivegreen1];',
        "n0 -> n1;",
        'n1 [label="SumBackward0"];',
        "n1 -> n2;",
        'n2 [label="MulBackward0"];',
        "n2 -> n3;",
        'n3 [label="ExpBackward0\\nsaved 0: [3] float32 (output 0)"];',
        "n3 -> n4;",
        'n4 [label="MulBackward0\\nsaved 0: [3] float32\\nsaved 1: [3] float32"];',
        "n4 -> n5;",
        "n4 -> n6;",
        'n5 [label="[3] float32", fillcolor=lightblue];',
        'n6 [label="[3] float32", fillcolor=lightblue];',
    )
    assert to_dot(y, show_saved=True) == before
    ae.sync.backward(y, retain_graph=True)
    assert to_dot(y, show_saved=True) == before  # retained: still there
    ae.sync.backward(y)
    after = before.replace("saved 0: [3] float32 (output 0)", "saved: freed")
    after = after.replace("saved 0: [3] float32\\nsaved 1: [3] float32", "saved: freed")
    assert to_dot(y, show_saved=True) == after
    # nothing was unpacked: the first backward's error still comes from the backward itself
    with pytest.raises(ae.AutogradError, match="backward through the graph a second time"):
        ae.sync.backward(y)


def test_show_saved_marks_values_modified_in_place_without_raising() -> None:
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1.0
    y = a.sin()
    a.mul_(2.0)
    assert 'n1 [label="SinBackward0\\nsaved 0: [2] float32 (stale)"];' in to_dot(y, show_saved=True)
    with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
        ae.sync.backward(y.sum())


def test_show_saved_of_copyslices_is_the_saved_values_of_its_op() -> None:
    w = ae.tensor([2.0], requires_grad=True)
    base = ae.zeros(3).clone()
    base[1:2].mul_(w)
    assert to_dot(base, show_saved=True) == dot(
        'n0 [label="output\\n[3] float32", fillcolor=darkolivegreen1];',
        "n0 -> n1;",
        'n1 [label="CopySlices\\nsaved 0: [1] float32"];',
        "n1 -> n2;",
        'n2 [label="[1] float32", fillcolor=lightblue];',
    )
    ae.sync.backward(base.sum())
    assert 'n1 [label="CopySlices\\nsaved: freed"];' in to_dot(base, show_saved=True)


def test_two_outputs_share_one_graph() -> None:
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()
    assert to_dot([h.sum(), h.mean(), x, ae.zeros(2)]) == dot(
        'n0 [label="output 0\\n[] float32", fillcolor=darkolivegreen1];',
        "n0 -> n4;",
        'n1 [label="output 1\\n[] float32", fillcolor=darkolivegreen1];',
        "n1 -> n5;",
        'n2 [label="output 2\\n[2] float32", fillcolor=darkolivegreen1];',
        "n2 -> n6;",
        'n3 [label="output 3\\n[2] float32\\nrequires_grad=False", fillcolor=darkolivegreen1];',
        'n4 [label="SumBackward0"];',
        "n4 -> n7;",
        'n5 [label="MeanBackward0"];',
        "n5 -> n7;",
        'n6 [label="[2] float32", fillcolor=lightblue];',
        'n7 [label="ExpBackward0"];',
        "n7 -> n6;",
    )


def test_a_leaf_output_with_no_accumulator_yet() -> None:
    x = ae.ones(2, requires_grad=True)
    x.register_hook(lambda g: None)
    assert to_dot(x, params={"x": x}) == dot(
        'n0 [label="x\\n[2] float32", fillcolor=darkolivegreen1];',
        "n0 -> n1;",
        'n1 [label="x\\n[2] float32\\nhooks: tensor 1", fillcolor=lightblue, peripheries=2];',
    )
    assert x._acc is None  # drawing it made no accumulator


@pytest.mark.slow
def test_deep_chain_of_100000_nodes() -> None:
    n = 100_000
    assert sys.getrecursionlimit() < n
    x = ae.ones(1, requires_grad=True)
    y = x
    for _ in range(n):
        y = -y
    text = ae.viz.to_dot(y, show_saved=True)
    lines = text.splitlines()
    assert len(lines) == 2 + 2 + 2 * n + 1 + 1
    assert lines[-2] == f'  n{n + 1} [label="[1] float32", fillcolor=lightblue];'
    assert lines[4:6] == ['  n1 [label="NegBackward0"];', "  n1 -> n2;"]
    nodes, edges = parse_dot(text)
    assert len(nodes) == n + 2 and len(edges) == n + 1


# -- bad arguments -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda x: ae.viz.to_dot([1.0]), TypeError, "element 0 is float"),
        (lambda x: ae.viz.to_dot(x.data), TypeError, "got ndarray"),
        (lambda x: ae.viz.to_dot("x"), TypeError, "got str"),
        (lambda x: ae.viz.to_dot([]), ValueError, "pass at least one Tensor"),
        (lambda x: ae.viz.to_dot(x, params=3), TypeError, "not int"),
        (lambda x: ae.viz.to_dot(x, params="ab"), TypeError, "not str"),
        (lambda x: ae.viz.to_dot(x, params=[x]), TypeError, "but an item is tensor"),
        (lambda x: ae.viz.to_dot(x, params={1: x}), TypeError, "must be a str, not int"),
        (lambda x: ae.viz.to_dot(x, params={"w": 1}), TypeError, r"params\['w'\] must be a Tensor"),
        (lambda x: ae.viz.to_dot(x, show_saved=1), TypeError, "show_saved must be a bool"),
        (lambda x: ae.viz.render(3, "g.svg"), TypeError, "dot must be DOT text"),
        (lambda x: ae.viz.render("digraph {}", 3), TypeError, "path must be a str or a path"),
        (lambda x: ae.viz.render("digraph {}", "g.pdf", "pdf"), ValueError, "'svg' or 'png'"),
    ],
)
def test_bad_arguments(call: Any, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        call(ae.ones(2, requires_grad=True))


# -- render ------------------------------------------------------------------------------


def test_render_without_the_graphviz_package_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz raises ImportError
    with pytest.raises(ImportError, match="pip install graphviz, and install the system package"):
        ae.viz.render("digraph {}", tmp_path / "g.svg")


def test_render_without_the_dot_program_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = types.ModuleType("graphviz")

    class ExecutableNotFound(RuntimeError):
        pass

    class Source:
        def __init__(self, source: str) -> None:
            self.source = source

        def pipe(self, format: str) -> bytes:
            raise ExecutableNotFound("failed to execute PosixPath('dot')")

    fake.ExecutableNotFound = ExecutableNotFound  # type: ignore[attr-defined]
    fake.Source = Source  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "graphviz", fake)
    with pytest.raises(RuntimeError, match="not Graphviz's `dot` program: install the system"):
        ae.viz.render("digraph {}", tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()


def test_render_writes_what_graphviz_gives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = types.ModuleType("graphviz")
    calls = []

    class Source:
        def __init__(self, source: str) -> None:
            self.source = source

        def pipe(self, format: str) -> bytes:
            calls.append((self.source, format))
            return b"<png bytes>"

    fake.ExecutableNotFound = RuntimeError  # type: ignore[attr-defined]
    fake.Source = Source  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "graphviz", fake)
    text = ae.viz.to_dot(ae.ones(1, requires_grad=True).exp())
    out = ae.viz.render(text, str(tmp_path / "g.png"), format="png")
    assert out == tmp_path / "g.png" and out.read_bytes() == b"<png bytes>"
    assert calls == [(text, "png")]


@pytest.mark.parametrize("fmt,magic", [("svg", b"<svg"), ("png", b"\x89PNG")])
def test_render_with_graphviz(tmp_path: Path, fmt: str, magic: bytes) -> None:
    pytest.importorskip(
        "graphviz", reason="the graphviz Python package is not installed: render not run"
    )
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's `dot` program is not installed: render not run")
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    text = ae.viz.to_dot((x * x).sum(), params={'w "1"': x}, show_saved=True)
    out = ae.viz.render(text, tmp_path / f"g.{fmt}", format=fmt)  # type: ignore[arg-type]
    assert magic in out.read_bytes()[:400]


def test_module_docstring_examples() -> None:
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(aengine.viz, "aengine.viz", globs={"ae": ae})
    assert sum(len(t.examples) for t in tests) >= 6
    for test in tests:
        assert runner.run(test).failed == 0, f"docstring example {test.name} failed"


# -- the same graph as PyTorch's ---------------------------------------------------------


def _walk(outputs: list[Any]) -> tuple[list[str], list[tuple[int, int, int | None]]]:
    """Node kinds in breadth-first order and edges of a PyTorch graph, as to_dot walks it."""
    kinds: list[str] = []
    edges: list[tuple[int, int, int | None]] = []
    ids: dict[int, int] = {}
    queue: list[Any] = []

    def target(fn: Any) -> int:
        key = id(fn.variable) if fn.name() == "torch::autograd::AccumulateGrad" else id(fn)
        if key not in ids:
            ids[key] = len(kinds)
            kinds.append("")
            queue.append(fn)
        return ids[key]

    for t in outputs:
        kinds.append("output")
    for i, t in enumerate(outputs):
        edges.append((i, target(t.grad_fn), None))
    while queue:
        fn = queue.pop(0)
        key = id(fn.variable) if hasattr(fn, "variable") else id(fn)
        me = ids[key]
        if hasattr(fn, "variable"):
            kinds[me] = "leaf"
            continue
        kinds[me] = fn.name().replace("torch::autograd::", "")
        for nxt, nr in fn.next_functions:
            if nxt is not None:
                multi = len(nxt._input_metadata) > 1
                edges.append((me, target(nxt), nr if multi else None))
    return kinds, edges


def _ours(text: str) -> tuple[list[str], list[tuple[int, int, int | None]]]:
    nodes, edges = parse_dot(text)
    kinds = []
    for attrs in nodes.values():
        color = attrs.get("fillcolor")
        kinds.append(
            "output"
            if color == "darkolivegreen1"
            else "leaf"
            if color == "lightblue"
            else attrs["label"]
        )
    num = lambda n: int(n[1:])  # noqa: E731
    return kinds, [(num(a), num(b), int(e["label"]) if "label" in e else None) for a, b, e in edges]


def _graphs(lib: Any) -> list[list[Any]]:
    x = lib.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
    w = lib.tensor([[0.5, 1.0], [-1.0, 2.0]], requires_grad=True)
    a, b = lib.split(x, 1)
    h = (x @ w).relu()
    base = lib.zeros(2, 2).clone()
    base[0].mul_(w[1])
    return [
        [(x * 2.0).exp().sum()],
        [(x * x).sin().sum()],
        [(a * b).sum(), b.sum()],
        [(h.sin() + h.cos()).mean()],
        [h.sum(), (h * w).sum(), x.T.sum()],
        [(base * x).sum()],
    ]


def test_same_nodes_and_edges_as_pytorch() -> None:
    torch = torch_or_skip()
    for ours, theirs in zip(_graphs(ae), _graphs(torch), strict=True):
        assert _ours(to_dot(ours)) == _walk(theirs)


def test_the_docs_page_shows_what_to_dot_prints(capsys: pytest.CaptureFixture[str]) -> None:
    page = (ROOT / "docs" / "visualizing.md").read_text()
    m = re.search(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", page, re.S)
    assert m is not None, "docs/visualizing.md: the first example and what it prints"
    exec(compile(m.group(1), "visualizing.md", "exec"), {})
    assert capsys.readouterr().out == m.group(2) + "\n"
