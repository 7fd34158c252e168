"""See what the engine does: a backward graph as Graphviz DOT text.

:func:`to_dot` walks the backward graph of a tensor from its ``grad_fn``
along ``next_functions``, as a backward would, and writes it in Graphviz's
DOT language, much as torchviz's ``make_dot`` does; :func:`render` turns
the text into an SVG or PNG file when Graphviz is installed.

Example::

    >>> import aengine as ae
    >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
    >>> print(ae.viz.to_dot((x * 2).sum(), params={"x": x}))
    digraph backward {
      node [shape=box, style=filled, fillcolor=lightgrey, fontname=monospace, fontsize=10];
      n0 [label="output\\n[] float32", fillcolor=darkolivegreen1];
      n0 -> n1;
      n1 [label="SumBackward0"];
      n1 -> n2;
      n2 [label="MulBackward0"];
      n2 -> n3;
      n3 [label="x\\n[2] float32", fillcolor=lightblue];
    }

# NOTE [Drawing the graph]
# The walk is breadth first from the outputs and iterative (a chain of
# 100,000 nodes is fine), and names the DOT nodes n0, n1... in the order it
# meets them, so that the text is the same for the same graph (no id() in
# it).  One DOT node per output tensor (green), one per backward node, and
# one per leaf (blue) in place of its AccumulateGrad node; an edge per entry
# of ``next_functions`` that is not None (``x * x`` has two edges to x), from
# the node towards the leaves, labelled with the input_nr where the target
# has several outputs (``split``).  Hooks are read from the dicts the engine
# runs them from, and the saved values of a node from where the node keeps
# them (``OpNode.saved``, a custom Function's SavedTensors, the op a
# CopySlices wraps) without unpacking them: no version check raises, no
# output is rebuilt, and a released node reads "saved: freed".
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ._function import BackwardCFunction
from .core import AccumulateGrad, Node, SavedTensor
from .ops._core import OpNode
from .tensors import Tensor
from .tensors._views import CopySlices

__all__ = ["to_dot", "render"]

_HEADER = (
    "digraph backward {",
    "  node [shape=box, style=filled, fillcolor=lightgrey, fontname=monospace, fontsize=10];",
)
_OUTPUT_COLOR = "darkolivegreen1"
_LEAF_COLOR = "lightblue"


def to_dot(
    tensor: Tensor | Sequence[Tensor],
    params: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]] | None = None,
    show_saved: bool = False,
) -> str:
    """The backward graph of ``tensor`` (or of several tensors) as Graphviz DOT text.

    One DOT node per backward node, labelled with its ``name()``
    (``MulBackward0``); edges follow ``next_functions`` from the output
    towards the leaves (labelled with the ``input_nr`` where the node they
    lead to has several outputs, as ``split``'s).  A leaf is drawn in place
    of its ``AccumulateGrad`` node (blue), with its shape and dtype, and its
    name where ``params`` names it; each output tensor is a node of its own
    (green: ``output``, or ``output 0``, ``output 1``... for a sequence).

    A node or tensor with hooks gets a double border and a line
    ``hooks: ...`` counting them: ``pre`` and ``post`` (node hooks),
    ``tensor`` (``register_hook`` on the tensors it produced, or on the
    leaf), ``retain_grad`` and ``post_accumulate``.

    Args:
        tensor: a Tensor, or a sequence of Tensors drawn as one graph.
        params: names for tensors: a dict name -> Tensor, or pairs
            ``(name, tensor)`` as a model's ``named_parameters()`` gives.
        show_saved: also list the values each node saved for backward
            (``saved 0: [2, 3] float32``, with ``(output 0)`` for a saved
            output and ``(stale)`` for a value changed in place since, which
            the backward would refuse), or ``saved: freed`` once a backward
            without ``retain_graph`` released them.  Nothing is unpacked.

    Returns:
        The DOT text (a ``digraph``): the same text for the same graph, with
        nodes named ``n0``, ``n1``... in the order of a breadth-first walk.

    Example::

        >>> import aengine as ae
        >>> w = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> dot = ae.viz.to_dot((w * w).sum(), params={"w": w}, show_saved=True)
        >>> print(dot.splitlines()[6])
          n2 [label="MulBackward0\\nsaved 0: [2] float32\\nsaved 1: [2] float32"];
    """
    outputs = _outputs(tensor)
    names = _names(params)
    if not isinstance(show_saved, bool):
        raise TypeError(f"to_dot(): show_saved must be a bool, not {type(show_saved).__name__}")
    return _Walk(names, show_saved).run(outputs)


def render(dot: str, path: str | os.PathLike[str], format: Literal["svg", "png"] = "svg") -> Path:
    """Render DOT text (from :func:`to_dot`) into an SVG or PNG file at ``path``.

    Uses the optional ``graphviz`` Python package and Graphviz's ``dot``
    program, which aengine does not depend on: install both (``pip install
    graphviz`` and the system package: ``apt install graphviz``, ``brew
    install graphviz`` or ``conda install graphviz``).  Raises ImportError
    without the package and RuntimeError without the program.

    Returns:
        The path of the written file.

    Example::

        >>> import aengine as ae
        >>> x = ae.ones(2, requires_grad=True)
        >>> ae.viz.render(ae.viz.to_dot(x.exp().sum()), "graph.svg")  # doctest: +SKIP
        PosixPath('graph.svg')
    """
    if not isinstance(dot, str):
        raise TypeError(f"render(): dot must be DOT text (a str), not {type(dot).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"render(): path must be a str or a path, not {type(path).__name__}")
    if format not in ("svg", "png"):
        raise ValueError(f"render(): format must be 'svg' or 'png', not {format!r}")
    try:
        # optional dependency: imported on use, so that aengine does not need it
        import graphviz
    except ImportError as e:
        raise ImportError(
            "render() needs the graphviz Python package and Graphviz's `dot` program: "
            "pip install graphviz, and install the system package (apt install graphviz, "
            "brew install graphviz or conda install graphviz)"
        ) from e
    try:
        data = graphviz.Source(dot).pipe(format=format)
    except graphviz.ExecutableNotFound as e:
        raise RuntimeError(
            "render() found the graphviz Python package but not Graphviz's `dot` program: "
            "install the system package (apt install graphviz, brew install graphviz or "
            "conda install graphviz) and make sure `dot` is on PATH"
        ) from e
    out = Path(path)
    out.write_bytes(data)
    return out


# -- arguments ---------------------------------------------------------------------------


def _outputs(tensor: Any) -> list[Tensor]:
    if isinstance(tensor, Tensor):
        return [tensor]
    if isinstance(tensor, Sequence) and not isinstance(tensor, (str, bytes, Node)):
        for i, t in enumerate(tensor):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"to_dot(): expected a Tensor or a sequence of Tensors, but element {i} "
                    f"is {type(t).__name__}"
                )
        if not tensor:
            raise ValueError("to_dot(): got an empty sequence: pass at least one Tensor")
        return list(tensor)
    raise TypeError(
        f"to_dot(): expected a Tensor or a sequence of Tensors, got {type(tensor).__name__}"
    )


def _names(params: Any) -> dict[int, str]:
    """``id(tensor) -> name`` (the first name of a tensor named twice)."""
    if params is None:
        return {}
    if isinstance(params, (str, bytes)) or not isinstance(params, Iterable):
        raise TypeError(
            "to_dot(): params must be a dict name -> Tensor or (name, Tensor) pairs, "
            f"not {type(params).__name__}"
        )
    pairs = params.items() if isinstance(params, Mapping) else params
    names: dict[int, str] = {}
    for item in pairs:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(
                "to_dot(): params must be a dict name -> Tensor or (name, Tensor) pairs, "
                f"but an item is {item!r}"
            )
        name, t = item
        if not isinstance(name, str):
            raise TypeError(f"to_dot(): a name in params must be a str, not {type(name).__name__}")
        if not isinstance(t, Tensor):
            raise TypeError(f"to_dot(): params[{name!r}] must be a Tensor, not {type(t).__name__}")
        names.setdefault(id(t), name)
    return names


# -- the walk ----------------------------------------------------------------------------


class _Walk:
    """One breadth-first walk of a graph, writing DOT lines (NOTE [Drawing the graph])."""

    def __init__(self, names: dict[int, str], show_saved: bool) -> None:
        self.names = names
        self.show_saved = show_saved
        self.lines: list[str] = list(_HEADER)
        #: id(node), or id(tensor) for a leaf, -> DOT id
        self.ids: dict[int, str] = {}
        #: what the walk met, kept alive while ids of them are in use
        self.met: list[Any] = []
        self.queue: deque[tuple[Any, str]] = deque()
        self.count = 0

    def run(self, outputs: list[Tensor]) -> str:
        first = [self._new_id() for _ in outputs]
        for i, (t, nid) in enumerate(zip(outputs, first)):
            self._output(t, nid, None if len(outputs) == 1 else i)
        while self.queue:
            obj, nid = self.queue.popleft()
            if isinstance(obj, Tensor):
                self._leaf(obj, nid, obj._acc() if obj._acc is not None else None)
            elif isinstance(obj, AccumulateGrad):
                self._leaf(obj.variable, nid, obj)
            else:
                self._node(obj, nid)
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def _new_id(self) -> str:
        nid = f"n{self.count}"
        self.count += 1
        return nid

    def _target(self, obj: Any) -> str:
        """The DOT id of a node or leaf tensor; queued to be drawn when new."""
        key = obj.variable if isinstance(obj, AccumulateGrad) else obj
        nid = self.ids.get(id(key))
        if nid is None:
            nid = self.ids[id(key)] = self._new_id()
            self.met.append(key)
            self.queue.append((obj, nid))
        return nid

    def _edge(self, src: str, fn: Node, nr: int) -> None:
        dst = self._target(fn)
        if fn.num_outputs > 1:
            self.lines.append(f'  {src} -> {dst} [label="{nr}"];')
        else:
            self.lines.append(f"  {src} -> {dst};")

    def _declare(self, nid: str, lines: list[str], hooks: list[str], color: str | None) -> None:
        if hooks:
            lines.append("hooks: " + ", ".join(hooks))
        attrs = f"label={_quote(lines)}"
        if color is not None:
            attrs += f", fillcolor={color}"
        if hooks:
            attrs += ", peripheries=2"
        self.lines.append(f"  {nid} [{attrs}];")

    def _output(self, t: Tensor, nid: str, index: int | None) -> None:
        name = self.names.get(id(t))
        if name is None:
            name = "output" if index is None else f"output {index}"
        lines = [name, _describe(t.data)]
        fn = t.grad_fn
        hooks: list[str] = []
        if fn is not None:
            pre = fn._tensor_pre_hooks
            n = sum(1 for h in pre.values() if h.output_nr == t.output_nr) if pre else 0
            _count(hooks, "tensor", n)
            _count(hooks, "retain_grad", int(t.retains_grad))
        elif not t.requires_grad:
            lines.append("requires_grad=False")
        self._declare(nid, lines, hooks, _OUTPUT_COLOR)
        if fn is not None:
            self._edge(nid, fn, t.output_nr)
        elif t.requires_grad:  # a leaf: drawn as the leaf node its accumulator would be
            self.lines.append(f"  {nid} -> {self._target(t)};")

    def _leaf(self, t: Any, nid: str, acc: AccumulateGrad | None) -> None:
        lines = [_describe(t.data)]
        name = self.names.get(id(t))
        if name is not None:
            lines.insert(0, name)
        hooks: list[str] = []
        if acc is not None:
            _count(hooks, "pre", len(acc._pre_hooks or ()))
            _count(hooks, "post", len(acc._post_hooks or ()))
        _count(hooks, "tensor", len(t._hooks or ()))
        _count(hooks, "post_accumulate", len(t._post_acc_hooks or ()))
        self._declare(nid, lines, hooks, _LEAF_COLOR)

    def _node(self, node: Node, nid: str) -> None:
        lines = [node.name()]
        if self.show_saved:
            lines += _saved_lines(node)
        hooks: list[str] = []
        _count(hooks, "pre", len(node._pre_hooks or ()))
        _count(hooks, "post", len(node._post_hooks or ()))
        _count(hooks, "tensor", len(node._tensor_pre_hooks or ()))
        _count(hooks, "retain_grad", len(node._retains_grad or ()))
        self._declare(nid, lines, hooks, None)
        for fn, nr in node.next_functions:
            if fn is not None:
                self._edge(nid, fn, nr)


def _count(hooks: list[str], kind: str, n: int) -> None:
    if n:
        hooks.append(f"{kind} {n}")


# -- labels ------------------------------------------------------------------------------


def _describe(data: Any) -> str:
    """``[2, 3] float32``: the shape and dtype of an array."""
    return "[" + ", ".join(str(s) for s in data.shape) + f"] {data.dtype}"


def _saved_lines(node: Node) -> list[str]:
    """The values ``node`` saved for backward, read where it keeps them (not unpacked)."""
    if isinstance(node, CopySlices):  # its op's saved values; released with the op
        inner = node.fn
        return ["saved: freed"] if inner is None else _saved_lines(inner)
    pairs: list[tuple[Any, bool]] = []
    if isinstance(node, OpNode):
        if node.saved is None:
            return ["saved: freed"]
        for s, v in zip(node.saved_values(), node.versions):
            pairs.append((s, s._vc[0] != v))
    elif isinstance(node, BackwardCFunction):
        if node._released:
            return ["saved: freed"]
        for st in node._saved or ():  # None: nothing saved (or forward still running)
            pairs.append((st, st is not None and st._vc[0] != st.version))
    lines = []
    for i, (s, stale) in enumerate(pairs):
        if s is None:
            lines.append(f"saved {i}: None")
            continue
        text = f"saved {i}: {_describe(s.data)}"
        if s.__class__ is SavedTensor and s.is_output:
            text += f" (output {s.output_nr})"
        if stale:
            text += " (stale)"
        lines.append(text)
    return lines


def _quote(lines: list[str]) -> str:
    """Lines as one quoted DOT string: quotes and backslashes escaped, ``\\n`` between."""
    parts = []
    for line in lines:
        line = line.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(line.replace("\r\n", "\\n").replace("\r", "\\n").replace("\n", "\\n"))
    return '"' + "\\n".join(parts) + '"'
