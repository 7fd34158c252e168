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
# Classes are found by their name among OpNode's subclasses once every
# family is imported; names that several classes share are set on the
# class objects instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from . import _arith
from ._core import OpNode

__all__ = ["FIELDS", "install"]

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
    count = 1
    for s in n.attrs[0]:
        count *= s
    return count


def _permute_dims(n: Any) -> tuple[int, ...]:
    inverse = n.attrs  # the permutation the backward applies
    dims = [0] * len(inverse)
    for i, d in enumerate(inverse):
        dims[d] = i
    return tuple(dims)


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
            "AdaptiveAvgPool2D AdaptiveMaxPool2D AvgPool2D MaxPool2DWithIndices"
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
    "AmaxBackward0": {"self": 0, "result": 1, "dim": _dims(1), "keepdim": _attr(2)},
    "AminBackward0": {"self": 0, "result": 1, "dim": _dims(1), "keepdim": _attr(2)},
    "CumprodBackward0": {"self": 0, "result": 1, "dim": _attr(0)},
    "LogcumsumexpBackward0": {"self": 0, "result": 1, "dim": _attr(0)},
    "CumsumBackward0": {"dim": _attr(0)},
    "DotBackward0": {"self": 0, "tensor": 1},
    "MvBackward0": {"self": 0, "vec": 1},
    "MmBackward0": {"self": 0, "mat2": 1},
    "AddmmBackward0": {"mat1": 0},
    "LerpBackward0": {"weight": _attr()},
    "LerpBackward1": {"self": 0, "end": 1, "weight": 2},
    "LinalgCholeskyExBackward0": {"L": 0, "upper": _attr()},
    "LinalgDetBackward0": {"A": 0, "result": 1},
    "LinalgEighBackward0": {"eigenvalues": 0},
    "LinalgInvExBackward0": {"inverse": 0},
    "LinalgQrBackward0": {"Q": 0, "R": 1, "mode": _attr()},
    "LinalgSolveExBackward0": {"A": 0, "result": 1},
    "LinalgSolveTriangularBackward0": {"self": 0, "result": 1},
    "SoftmaxBackward0": _RESULT,
    "LogSoftmaxBackward0": _RESULT,
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
    **{
        name: _BY_DIM
        for name in (
            "MaxBackward0",
            "MinBackward0",
            "MedianBackward1",
            "ModeBackward0",
            "KthvalueBackward0",
        )
    },
    "SumBackward0": {"self_sym_sizes": _attr()},
    "SumBackward1": {"self_sym_sizes": _attr(0), "dim": _dims(1), "keepdim": _attr(2)},
    "ProdBackward1": {"self": 0, "result": 1, "dim": lambda n: n.attrs[1][0], "keepdim": _attr(2)},
    "StdBackward0": {"self": 0, "result": 1, "dim": _attr(1), "keepdim": _attr(2)},
    "VarBackward0": {"self": 0, "dim": _attr(1), "keepdim": _attr(2)},
    "PowBackward1": {"self": 0, "exponent": 1, "result": 2},
    "PolygammaBackward0": {"self": 0, "n": _attr()},
    "CeluBackward0": {"self": 0},
    "EluBackward0": {"self": 0},
    "GeluBackward0": {"self": 0, "approximate": _attr()},
    "HardtanhBackward0": {"self": 0, "min_val": _attr(0), "max_val": _attr(1)},
    "LeakyReluBackward0": {"self": 0, "negative_slope": _attr()},
    "SoftplusBackward0": {"self": 0, "beta": _attr(0), "threshold": _attr(1)},
    "ClampBackward1": {"self": 0, "min": _attr(0), "max": _attr(1)},
    "GatherBackward0": {"index": 0, "dim": _attr(1)},
    "IndexSelectBackward0": {"index": 0, "self_sym_sizes": _attr(0)},
    "StackBackward0": {"dim": _attr()},
    "CatBackward0": {"dim": _attr(0)},
    "UnbindBackward0": {"dim": _attr(0)},
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
    "RepeatBackward0": {"repeats": _attr(1)},
    "PermuteBackward0": {"dims": _permute_dims},
    "SelectBackward0": {"self_sym_sizes": _attr(0)},
    "SliceBackward0": {"self_sym_sizes": _attr(0)},
    "NativeLayerNormBackward0": {"input": 0},
    "NativeBatchNormBackward0": {"input": 0, "eps": _attr(2)},
    "NativeGroupNormBackward0": {"input": 0, "eps": _attr(2)},
    "ConvolutionBackward0": {"input": 0, "weight": 1},
    "BinaryCrossEntropyBackward0": {"self": 0, "target": 1},
}

#: classes whose name other classes share (a scalar operand's variant of an op)
_BY_CLASS: dict[type[OpNode], dict[str, Field]] = {
    _arith.MulBackward0: _SELF_OTHER,
    _arith.DivBackward0: _SELF_OTHER,
    _arith.PowBackward0: {"self": 0, "exponent": _attr()},
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


def install() -> None:
    """Give each node class its saved values' attributes (NOTE [Saved values by torch's names])."""
    classes = list(_subclasses(OpNode))
    counts: dict[str, int] = {}
    for cls in classes:
        counts[cls.__name__] = counts.get(cls.__name__, 0) + 1
    for cls in classes:
        fields = FIELDS.get(cls.__name__)
        if fields is not None and counts[cls.__name__] == 1:
            _give(cls, fields)
    for cls, fields in _BY_CLASS.items():
        _give(cls, fields)
