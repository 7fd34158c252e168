"""The values a built-in op's node saved, by the names torch gives them (``grad_fn._saved_self``).

# NOTE [Saved values by torch's names]
# torch generates, per backward node, one ``_saved_<name>`` attribute for
# each value its derivative formula saves (``self``, ``other``, ``result``,
# ``dim``, ``keepdim``, ``exponent``...) and a ``_raw_saved_<name>`` for
# each saved tensor (an object with ``register_hooks(pack, unpack)``).  An
# aengine node keeps its saved tensors positionally in ``saved`` and its
# other facts in ``attrs`` (NOTE [Saved tensors of built-in ops]); this
# module gives each node class the map from torch's names to them
# (``OpNode.saved_fields``: a position in ``saved`` as recorded, or a
# function of the node), and makes each name a property of the class, once
# at import.  Properties, not a ``__getattr__``: a class that defines
# ``__getattr__`` loses the interpreter's fast attribute access on all its
# instances, which the backward's hot path reads; recording and running
# nodes pay nothing for class attributes they never read.  A saved tensor read after the graph
# was freed raises the "backward through the graph a second time" error,
# and one modified in place since its save the in-place error, as torch's;
# the other values stay readable.  Dimensions are given as non-negative
# indices (torch gives them as passed, a negative one as 2**64 + d).
# A tensor the node keeps as an array of its own (indices, a mask, batch
# statistics in ``attrs``) is wrapped anew at each read and has no
# ``_raw_saved_<name>``: it is no SavedTensor, hooks never pack it.  A
# value the node neither keeps nor can work out exactly (another
# algorithm's intermediate, an argument folded into what it keeps) is
# left out rather than kept by the forward (docs/memory.md lists them).
# Classes are found by their name among OpNode's subclasses once every
# family is imported; names that several classes share are set on the
# class objects instead (``_BY_CLASS``), or on all of them where they
# save the same (``_SHARED``); classes made later (split's and unbind's,
# one per number of outputs) get theirs from ``give`` as they are made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from . import _arith, _decomp, _index, _linalg, _reduce
from ._core import OpNode, wrap

__all__ = ["FIELDS", "give", "install"]

Field = int | Callable[[Any], Any]


def _attr(i: int | None = None) -> Callable[[Any], Any]:
    """A field read from ``attrs`` (``attrs[i]``; the whole of it when ``i`` is None)."""
    if i is None:
        return lambda n: n.attrs
    return lambda n: n.attrs[i]


def _dims(i: int) -> Callable[[Any], Any]:
    """``attrs[i]``: reduced dims as a tuple, () for all (as torch's optional dim lists)."""
    return lambda n: () if n.attrs[i] is None else tuple(n.attrs[i])


def _numel(n: Any) -> int:
    return math.prod(n.attrs[0])


def _mT(t: Any) -> Any:
    """``t`` with its last two dims swapped (None stays None)."""
    return None if t is None else t.transpose(-2, -1)


def _permute_dims(n: Any) -> tuple[int, ...]:
    inverse = n.attrs  # the permutation the backward applies
    dims = [0] * len(inverse)
    for i, d in enumerate(inverse):
        dims[d] = i
    return tuple(dims)


def _array(get: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A tensor the node keeps as an array in its ``attrs`` (indices, a mask), as a Tensor."""
    return lambda n: wrap(get(n), n.dev)


def _const(value: Any) -> Callable[[Any], Any]:
    """A value every node of the class has (an argument aengine's op takes one value of)."""
    return lambda n: value


def _indices(n: Any) -> Any:
    """The indices of a reduction along one dim, kept with the dim (``attrs[3]``), as torch's."""
    shape, dim, keepdim, idx = n.attrs[:4]
    return wrap(idx if keepdim else idx.reshape(shape[:dim] + shape[dim + 1 :]), n.dev)


def _stats(i: int, shape: Callable[[Any], tuple[int, ...]]) -> Callable[[Any], Any]:
    """A normalisation's batch statistic (0: mean, 1: 1/std) in torch's shape."""
    return lambda n: wrap(n.attrs[8][i].reshape(shape(n)), n.dev)


def _weight(n: Any) -> Any:
    """A normalisation's weight (saved after the input when there is one)."""
    return None if n.attrs[6] is None else n.saved_field(1)


def _basic_item(n: Any) -> tuple[int, int, Any, tuple[int, ...]]:
    """The last op of a basic index: its dim, that dim in ``x``, its item, its input's shape.

    torch applies the items in order, keeping a dim counter: an int selects
    at it, a slice and a None advance it, an Ellipsis skips the dims no item
    names; full slices are no ops of their own.  aengine records one node
    for the whole index; torch's last node is the last item's.
    """
    items = n.attrs[1]
    shape = list(n.attrs[0])
    skip = len(shape) - sum(1 for it in items if it is not None and it is not Ellipsis)
    dim = src = 0
    last: tuple[int, int, Any, tuple[int, ...]] = (0, 0, None, n.attrs[0])
    for it in items:
        if it is Ellipsis:
            dim += skip
            src += skip
            continue
        if it.__class__ is not slice or it != slice(None) or len(items) == 1:
            last = (dim, src, it, tuple(shape))
        if it is None:
            shape.insert(dim, 1)
        elif it.__class__ is int:
            del shape[dim]
        else:
            shape[dim] = len(range(*it.indices(shape[dim])))
        if it.__class__ is not int:
            dim += 1
        if it is not None:
            src += 1
    return last


def _select_index(n: Any) -> int:
    _, src, it, _ = _basic_item(n)
    return int(it) % int(n.attrs[0][src])


def _slice_part(part: str) -> Callable[[Any], Any]:
    """A slice's ``start``/``end``/``step`` as torch gives them (an open end as int64's max)."""

    def get(n: Any) -> int:
        _, src, it, _ = _basic_item(n)
        size = n.attrs[0][src]
        if part == "step":
            return 1 if it.step is None else int(it.step)
        v = it.start if part == "start" else it.stop
        if v is None:
            return 0 if part == "start" else 2**63 - 1
        return int(v) + size if v < 0 else int(v)

    return get


def _transposed_output_padding(n: Any) -> tuple[int, ...]:
    """A transposed convolution's ``output_padding``: its output size less the one it implies."""
    kind, g = n.attrs
    if kind != "input":
        return (0,) * len(g.kernel)
    return tuple(
        full - ((o - 1) * s - 2 * p + d * (k - 1) + 1)
        for full, o, s, p, d, k in zip(
            g.in_size, g.out_size, g.stride, g.pad_lo, g.dilation, g.kernel, strict=True
        )
    )


def _softmax_dim(n: Any) -> int:
    """softmax's dim (a 0-d input keeps none: its one dim, 0)."""
    return 0 if n.attrs is None else int(n.attrs[0])


def _pad(n: Any) -> tuple[int, ...]:
    """constant_pad_nd's ``pad``: (before, after) per dim, the last dim first."""
    lo, hi = n.attrs
    return tuple(v for i in reversed(range(len(lo))) for v in (lo[i], hi[i]))


#: a convolution-like op's geometry (``attrs[1]``), by torch's names
_GEOM: dict[str, Field] = {
    "kernel_size": lambda n: n.attrs[1].kernel,
    "stride": lambda n: n.attrs[1].stride,
    "padding": lambda n: n.attrs[1].pad_lo,
    "dilation": lambda n: n.attrs[1].dilation,
}

_SELF: dict[str, Field] = {"self": 0}
_RESULT: dict[str, Field] = {"result": 0}
_SELF_OTHER: dict[str, Field] = {"self": 0, "other": 1}
_SELF_RESULT: dict[str, Field] = {"self": 0, "result": 1}

#: reductions along one dim that keep the indices (max, min, median, mode, kthvalue)
_BY_DIM: dict[str, Field] = {"self_sym_sizes": _attr(0), "dim": _attr(1), "keepdim": _attr(2)}

#: node class name -> torch's names of its saved values
FIELDS: dict[str, dict[str, Field]] = {
    **{
        f"{n}Backward0": _SELF
        for n in (
            "Abs Acos Acosh Asin Asinh Atan Atanh Cos Cosh Digamma Erf Erfc Lgamma Log Log10 "
            "Log1P Log2 Sin Sinh NanToNum Hardsigmoid Hardswish Mish Silu LogSigmoid "
            "AdaptiveAvgPool2D AdaptiveMaxPool2D MaxPool2DWithIndices"
        ).split()
    },
    **{
        f"{n}Backward0": _RESULT
        for n in "Exp Exp2 Expm1 Reciprocal Relu Sigmoid Sqrt Rsqrt Tan Tanh".split()
    },
    **{
        f"{n}Backward0": _SELF_OTHER
        for n in "Atan2 Fmax Fmin Logaddexp Logaddexp2 Xlogy Maximum Minimum".split()
    },
    **{f"{n}Backward1": _SELF_RESULT for n in ("Max", "Min")},
    "MedianBackward0": _SELF_RESULT,
    "LinalgPinvBackward0": _SELF_RESULT,
    "ProdBackward0": _SELF_RESULT,
    "HypotBackward0": {"self": 0, "other": 1, "result": 2},
    "CopysignBackward0": {"self": 0, "result": 2},
    "AddcmulBackward0": {"tensor1": 0, "tensor2": 1, "value": _attr()},
    "AddcdivBackward0": {"tensor1": 0, "tensor2": 1, "value": _attr()},
    "AvgPool2DBackward0": {
        "self": 0,
        "kernel_size": lambda n: n.attrs[1].kernel,
        "padding": lambda n: n.attrs[1].pad_lo,
    },
    "AmaxBackward0": {"self": 0, "result": 1, "dim": _dims(1), "keepdim": _attr(2)},
    "AminBackward0": {"self": 0, "result": 1, "dim": _dims(1), "keepdim": _attr(2)},
    "CumprodBackward0": {"self": 0, "result": 1, "dim": _attr(0)},
    "LogcumsumexpBackward0": {"self": 0, "result": 1, "dim": _attr(0)},
    "CumsumBackward0": {"dim": _attr(0)},
    "CummaxBackward0": {"dim": _attr(1), "indices": _array(_attr(2))},
    "CumminBackward0": {"dim": _attr(1), "indices": _array(_attr(2))},
    "DotBackward0": {"self": 0, "tensor": 1},
    "MvBackward0": {"self": 0, "vec": 1},
    "AddmmBackward0": {  # linear's: no alpha or beta of its own
        "mat1": 0,
        "mat2": lambda n: _mT(n.saved_field(1)),
        "alpha": _const(1),
        "beta": _const(1),
    },
    "LerpBackward0": {"weight": _attr()},
    "LerpBackward1": {"self": 0, "end": 1, "weight": 2},
    "LinalgCholeskyExBackward0": {"L": 0, "upper": _attr()},
    "LinalgDetBackward0": {"A": 0, "result": 1},
    "LinalgEighBackward0": {"eigenvalues": 0, "eigenvectors": 1},
    "LinalgInvExBackward0": {"inverse": 0},
    # left=False solves the transposed system: that node is a left one
    "LinalgSolveExBackward0": {"A": 0, "result": 1, "left": _const(True)},
    "LinalgSolveTriangularBackward0": {
        "self": 0,
        "result": 1,
        "upper": _attr(0),
        "left": _attr(1),
        "unitriangular": _attr(2),
    },
    "SoftmaxBackward0": {"result": 0, "dim": _softmax_dim},
    "LogSoftmaxBackward0": {"result": 0, "dim": _softmax_dim},
    "LogsumexpBackward0": {"self": 0, "result": 1, "dim": _dims(1), "keepdim": _attr(2)},
    "MaskedFillBackward0": {"mask": 0},
    "MaskedFillBackward1": {"mask": 0},
    "MeanBackward0": {"self_sym_sizes": _attr(0), "self_sym_numel": _numel},
    "MeanBackward1": {
        "self_sym_sizes": _attr(0),
        "self_sym_numel": _numel,
        "dim": _dims(1),
        "keepdim": _attr(2),
    },
    "MedianBackward1": _BY_DIM,
    **{
        name: {**_BY_DIM, "indices": _indices}
        for name in ("MaxBackward0", "MinBackward0", "ModeBackward0", "KthvalueBackward0")
    },
    "NansumBackward0": {"dim": _attr(1), "keepdim": _attr(2)},
    "NllLossBackward0": _SELF,
    "NllLoss2DBackward0": _SELF,
    "SumBackward0": {"self_sym_sizes": _attr()},
    "SumBackward1": {"self_sym_sizes": _attr(0), "dim": _dims(1), "keepdim": _attr(2)},
    "ProdBackward1": {"self": 0, "result": 1, "dim": lambda n: n.attrs[1][0], "keepdim": _attr(2)},
    "StdBackward0": {"self": 0, "result": 1, "dim": _attr(1), "keepdim": _attr(2)},
    "VarBackward0": {"self": 0, "dim": _attr(1), "keepdim": _attr(2)},
    "PowBackward1": {"self": 0, "exponent": 1, "result": 2},
    "PolygammaBackward0": {"self": 0, "n": _attr()},
    "CeluBackward0": {"self": 0, "alpha": _attr(0)},
    "EluBackward0": {"self": 0, "alpha": _attr(0), "scale": _attr(1), "input_scale": _attr(2)},
    "GeluBackward0": {"self": 0, "approximate": _attr()},
    "HardtanhBackward0": {"self": 0, "min_val": _attr(0), "max_val": _attr(1)},
    "LeakyReluBackward0": {"self": 0, "negative_slope": _attr()},
    "SoftplusBackward0": {"self": 0, "beta": _attr(0), "threshold": _attr(1)},
    "ClampBackward1": {"self": 0, "min": _attr(0), "max": _attr(1)},
    "GatherBackward0": {"index": 0, "dim": _attr(1), "sparse_grad": _const(False)},
    "IndexSelectBackward0": {
        "index": 0,
        "self_sym_sizes": _attr(0),
        "dim": lambda n: n.attrs[2][0],
    },
    "StackBackward0": {"dim": _attr()},
    "CatBackward0": {"dim": _attr(0)},
    "SplitBackward0": {
        "dim": _attr(0),
        "split_size": lambda n: n.attrs[1][0],
        "self_sym_sizes": _attr(2),
    },
    "SplitWithSizesBackward0": {
        "dim": _attr(0),
        "split_sizes": _attr(1),
        "self_sym_sizes": _attr(2),
    },
    "SqueezeBackward0": {"self_sym_sizes": _attr()},
    "SqueezeBackward1": {"self_sym_sizes": _attr()},
    "ExpandBackward0": {"self_sym_sizes": _attr()},
    "ViewBackward0": {"self_sym_sizes": _attr()},
    "RepeatBackward0": {"repeats": _attr(1), "self_sym_sizes": _attr(2)},
    "PermuteBackward0": {"dims": _permute_dims},
    "SelectBackward0": {
        "self_sym_sizes": lambda n: _basic_item(n)[3],
        "dim": lambda n: _basic_item(n)[0],
        "index": _select_index,
    },
    "SliceBackward0": {
        "self_sym_sizes": lambda n: _basic_item(n)[3],
        "dim": lambda n: _basic_item(n)[0],
        "start": _slice_part("start"),
        "end": _slice_part("stop"),
        "step": _slice_part("step"),
    },
    "NativeLayerNormBackward0": {
        "input": 0,
        "weight": _weight,
        "normalized_shape": _attr(4),
        "result1": _stats(0, lambda n: n.attrs[8][0].shape),
        "result2": _stats(1, lambda n: n.attrs[8][1].shape),
    },
    "NativeBatchNormBackward0": {  # recorded in training only (eval mode is another node)
        "input": 0,
        "eps": _attr(2),
        "weight": _weight,
        "training": _const(True),
        "result1": _stats(0, lambda n: (n.attrs[5][1],)),
        "result2": _stats(1, lambda n: (n.attrs[5][1],)),
    },
    "NativeGroupNormBackward0": {
        "input": 0,
        "eps": _attr(2),
        "weight": _weight,
        "N": lambda n: n.attrs[5][0],
        "C": lambda n: n.attrs[5][1],
        "HxW": lambda n: math.prod(n.attrs[5][2:]),
        "group": lambda n: n.attrs[0][1],
        "result1": _stats(0, lambda n: n.attrs[0][:2]),
        "result2": _stats(1, lambda n: n.attrs[0][:2]),
    },
    "ConvolutionBackward0": {
        "input": 0,
        "weight": 1,
        "stride": lambda n: n.attrs[1].stride,
        "padding": lambda n: n.attrs[1].pad_lo,
        "dilation": lambda n: n.attrs[1].dilation,
        "groups": lambda n: n.attrs[1].groups,
        "transposed": lambda n: n.attrs[0] == "input",
        "output_padding": _transposed_output_padding,
    },
    "Im2ColBackward0": {
        **_GEOM,
        "self_sym_argsize_minus_2": lambda n: n.attrs[1].in_size[-2],
        "self_sym_argsize_minus_1": lambda n: n.attrs[1].in_size[-1],
    },
    "Col2ImBackward0": _GEOM,
    "ConstantPadNdBackward0": {"pad": _pad},
    # views by flat positions: the input's shape is the positions' (not the op's arguments)
    "DiagonalBackward0": {"self_sym_sizes": lambda n: n.attrs[0].shape},
    "UnfoldBackward0": {"self_sym_sizes": lambda n: n.attrs[0].shape},
    "EmbeddingBackward0": {
        "weight_sym_argsize_0": lambda n: n.attrs[3][0],
        "sparse": _const(False),
    },
    "WhereBackward0": {"condition": _array(_attr())},
    "UnbindBackward0": {"dim": _attr(0)},
    "LogitBackward0": {"self": 0, "eps": _attr()},
    "BinaryCrossEntropyBackward0": {"self": 0, "target": 1},
}

#: classes whose name other classes share (a scalar operand's variant of an op)
_BY_CLASS: dict[type[OpNode], dict[str, Field]] = {
    _arith.MulBackward0: _SELF_OTHER,
    _arith.DivBackward0: _SELF_OTHER,
    _arith.PowBackward0: {"self": 0, "exponent": _attr()},
    _linalg.MmBackward0: {"self": 0, "mat2": 1},
    _decomp.LinalgQrBackward0: {"Q": 0, "R": 1, "mode": _attr()},
    _arith.DivScalarBackward: {  # torch saves the number as a 0-d tensor
        "other": lambda n: wrap(n.dev.backend.xp.asarray(n.attrs), n.dev),
        "self": _const(None),
    },
    _index.UnsqueezeBackward0: {"dim": lambda n: _basic_item(n)[0]},
    _reduce.LinalgVectorNormBackward0: {
        "self": 0,
        "result": 1,
        "dim": _attr(1),
        "keepdim": _attr(2),
        "ord": _attr(3),
    },
}

#: names several classes share where every one of them saves the same values
_SHARED: dict[str, dict[str, Field]] = {
    "ReluBackward0": _RESULT,
    "ErfBackward0": _SELF,
    "PowBackward0": {"self": 0, "exponent": _const(2)},  # square's (pow's own: _BY_CLASS)
}


def _subclasses(cls: type[OpNode]) -> Iterator[type[OpNode]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _value(field: Field) -> property:
    return property(lambda node: node.saved_field(field), doc="A value saved for backward.")


def _raw(position: int) -> property:
    return property(lambda node: node.raw_saved(position), doc="A tensor saved for backward.")


def _give(cls: type[OpNode], fields: dict[str, Field]) -> None:
    """``cls``'s ``saved_fields`` and its ``_saved_<name>``/``_raw_saved_<name>`` properties."""
    cls.saved_fields = fields
    for name, field in fields.items():
        setattr(cls, f"_saved_{name}", _value(field))
        if field.__class__ is int:
            setattr(cls, f"_raw_saved_{name}", _raw(field))


def give(cls: type[OpNode]) -> None:
    """Give ``cls``, a class made after ``install`` (one per number of outputs), its fields."""
    fields = FIELDS.get(cls.__name__)
    if fields is not None:
        _give(cls, fields)


def install() -> None:
    """Give each node class its saved values' attributes (NOTE [Saved values by torch's names])."""
    classes = list(_subclasses(OpNode))
    counts: dict[str, int] = {}
    for cls in classes:
        counts[cls.__name__] = counts.get(cls.__name__, 0) + 1
    for cls in classes:
        fields = _BY_CLASS.get(cls)
        if fields is None:
            fields = FIELDS.get(cls.__name__) if counts[cls.__name__] == 1 else None
        if fields is None:
            fields = _SHARED.get(cls.__name__)
        if fields is not None:
            _give(cls, fields)
