"""Bad input to every public entry point: a clear error, and no ``.grad`` touched.

One table row per (entry point, bad input): the call, the exception type it
must raise and a fragment of a clear message (``match``).  Each row runs with
a leaf ``x`` (shape (2, 3), float64, requires grad) whose ``.grad`` already
holds 7s, and checks afterwards that ``x.grad`` is the same tensor with the
same values and that ``x`` itself did not change.

The rows follow the project's rule (docs/errors.md): ``TypeError`` for an
argument of the wrong kind, ``ValueError`` (``IndexError`` for an index or
dim, as PyTorch) for a value out of range, ``ae.AutogradError`` (a
RuntimeError) for a wrong state, PyTorch's wording where it has one.  A row
whose current error is unclear (an ``AttributeError`` from deep inside,
numpy's wording that names neither the function nor the argument) or of the
wrong type, or that is not refused at all, is marked ``xfail(strict=True)``
with what is wrong; the row states the error it should give.

``test_every_public_entry_point_has_rows`` keeps the table complete: every
name of ``aengine.__all__`` that takes arguments, every ``ae.sync`` /
``ae.functional`` entry point and every public ``ae.Tensor`` method has a
row, or is listed in ``NO_BAD_INPUT`` with the reason it has none.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae

F64 = ae.float64


async def _engine_run(fn: Any) -> Any:
    async with ae.Engine() as engine:
        return await engine.run(fn)


async def _closed_engine_run() -> Any:
    async with ae.Engine() as engine:
        pass
    return await engine.run(print)


def t(data: Any, **kwargs: Any) -> ae.Tensor:
    """A float64 tensor (explicit dtype: nothing depends on the default dtype)."""
    return ae.tensor(np.asarray(data, dtype=np.float64), dtype=F64, **kwargs)


def nonleaf(x: ae.Tensor) -> ae.Tensor:
    """A tensor in x's graph that may be modified in place."""
    return x * 1


def _nested_exec_groups() -> None:
    with ae.GraphExecGroup(), ae.GraphExecGroup():
        pass


def backward_through(x: ae.Tensor, hook: Callable[[Any], Any]) -> None:
    """A backward from ``x`` whose intermediate gradient goes through ``hook``."""
    y = x * 2
    y.register_hook(hook)
    ae.sync.backward(y.sum())


def in_loop(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await an awaitable entry point (ae.grad, ae.functional.vjp...) under asyncio."""

    async def main() -> Any:
        return await fn(*args, **kwargs)

    return anyio.run(main)


def function_with(forward: Callable[..., Any]) -> Any:
    """A custom Function whose forward is ``forward`` and whose backward passes g through."""

    class Custom(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return forward(ctx, x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    return Custom


@dataclass(frozen=True)
class Bad:
    call: Callable[[ae.Tensor], Any]
    exc: type[BaseException]
    match: str
    #: why the current error is unclear or of the wrong type (the row is a strict xfail)
    unclear: str | None = None
    #: False only where the error comes, by design, after the backward wrote .grad
    keeps_grad: bool = True


_NUMPY = "numpy's text, which names neither the function nor the argument"
_ACCEPTED = "accepted silently"

TABLE: dict[str, Bad] = {
    # -- creation ---------------------------------------------------------------------------
    # -- random numbers, numpy, checkpoints (aengine/tensors/_random.py, _serialization.py) --
    "ae.randint: low >= high": Bad(
        lambda x: ae.randint(5, 3, (2,)), RuntimeError, "from=5 >= to=3"
    ),
    "ae.randint: no size": Bad(lambda x: ae.randint(5), TypeError, r"\(low, high, size\)"),
    "ae.randint_like: float high": Bad(
        lambda x: ae.randint_like(x, 2.5), TypeError, "'high' must be an int"
    ),
    "ae.randperm: negative n": Bad(lambda x: ae.randperm(-1), RuntimeError, "non-negative"),
    "ae.bernoulli: probability above 1": Bad(
        lambda x: ae.bernoulli(x * 0 + 2), RuntimeError, r"in \[0, 1\]"
    ),
    "ae.multinomial: too many without replacement": Bad(
        lambda x: ae.multinomial(t([0.0, 1.0]), 2), RuntimeError, "without replacement"
    ),
    "ae.from_numpy: a list": Bad(lambda x: ae.from_numpy([1.0]), TypeError, "expected np.ndarray"),
    "ae.save: not a dict": Bad(lambda x: ae.save([x], "/nonexistent/f"), TypeError, "takes a dict"),
    "ae.save: an object it cannot store": Bad(
        lambda x: ae.save({"a": {"b": object()}}, "/nonexistent/f"), TypeError, "a.b is a object"
    ),
    "ae.load: not a checkpoint": Bad(
        lambda x: ae.load(__file__), ValueError, "is not a safetensors checkpoint"
    ),
    "ae.tensor: str data": Bad(lambda x: ae.tensor("abc"), TypeError, "a tensor holds numbers"),
    "ae.tensor: ragged nested lists": Bad(
        lambda x: ae.tensor([[1.0, 2.0], [3.0]]),
        ValueError,
        "expected sequence of length 2 at dim 1",
    ),
    "ae.tensor: requires_grad on integers": Bad(
        lambda x: ae.tensor([1, 2], requires_grad=True),
        ae.AutogradError,
        "only Tensors of floating point",
    ),
    "ae.tensor: requires_grad not a bool": Bad(
        lambda x: ae.tensor([1.0], dtype=F64, requires_grad="yes"),
        TypeError,
        "argument 'requires_grad' must be bool, not str",
    ),
    "ae.tensor: unknown device": Bad(
        lambda x: ae.tensor([1.0], device="bogus"), ValueError, "unknown device 'bogus'"
    ),
    "ae.as_tensor: an object": Bad(
        lambda x: ae.as_tensor(object()), TypeError, "a tensor holds numbers"
    ),
    "ae.as_tensor: unknown dtype": Bad(
        lambda x: ae.as_tensor([1.0], dtype="bogus"), TypeError, "not a dtype: 'bogus'"
    ),
    "ae.ones: negative size": Bad(
        lambda x: ae.ones(-1, dtype=F64), ValueError, "sizes must be non-negative integers"
    ),
    "ae.ones: float size": Bad(
        lambda x: ae.ones(2.5, dtype=F64), TypeError, "an element of type float"
    ),
    "ae.ones: unknown dtype": Bad(
        lambda x: ae.ones(2, dtype="bogus"), TypeError, "not a dtype: 'bogus'"
    ),
    "ae.zeros: str in the size": Bad(
        lambda x: ae.zeros((2, "a"), dtype=F64), TypeError, "an element of type str"
    ),
    "ae.empty: negative size": Bad(
        lambda x: ae.empty(-1, dtype=F64), ValueError, "sizes must be non-negative integers"
    ),
    "ae.full: negative size": Bad(
        lambda x: ae.full((-1,), 1.0, dtype=F64), ValueError, "sizes must be non-negative"
    ),
    "ae.full: str fill value": Bad(
        lambda x: ae.full((2,), "a"), TypeError, "fill_value must be a number"
    ),
    "ae.eye: negative n": Bad(
        lambda x: ae.eye(-1, dtype=F64),
        ValueError,
        "n must be greater or equal to 0",
    ),
    "ae.eye: str n": Bad(lambda x: ae.eye("a", dtype=F64), TypeError, "eye.*'n' must be an int"),
    "ae.arange: zero step": Bad(
        lambda x: ae.arange(0, 10, 0), ValueError, "^step must be nonzero$"
    ),
    "ae.arange: step of the wrong sign": Bad(
        lambda x: ae.arange(10, 0, 1),
        ValueError,
        "upper bound and lower bound inconsistent with step sign",
    ),
    "ae.arange: str end": Bad(lambda x: ae.arange("a"), TypeError, "end must be a number"),
    "ae.linspace: negative steps": Bad(
        lambda x: ae.linspace(0, 1, -1), ValueError, "must be non-negative"
    ),
    "ae.linspace: str steps": Bad(
        lambda x: ae.linspace(0, 1, "a"), TypeError, "linspace.*steps.*int"
    ),
    "ae.linspace: str start": Bad(
        lambda x: ae.linspace("a", 1, 3),
        TypeError,
        "linspace.*start.*number",
    ),
    "ae.rand: negative size": Bad(
        lambda x: ae.rand(-1, dtype=F64), ValueError, "sizes must be non-negative"
    ),
    "ae.rand: generator not a Generator": Bad(
        lambda x: ae.rand(2, generator="a"), TypeError, "generator must be an ae.Generator"
    ),
    "ae.randn: str size": Bad(
        lambda x: ae.randn("a", dtype=F64), TypeError, "an element of type str"
    ),
    "ae.ones_like: str": Bad(
        lambda x: ae.ones_like("a"), TypeError, r"ones_like\(\): argument 'input' must be a Tensor"
    ),
    "ae.zeros_like: unknown dtype": Bad(
        lambda x: ae.zeros_like(x, dtype="bogus"), TypeError, "not a dtype: 'bogus'"
    ),
    "ae.empty_like: int": Bad(
        lambda x: ae.empty_like(5), TypeError, r"empty_like\(\): argument 'input' must be a Tensor"
    ),
    "ae.full_like: str fill value": Bad(
        lambda x: ae.full_like(x, "a"), TypeError, "fill_value must be a number"
    ),
    "ae.rand_like: integer input": Bad(
        lambda x: ae.rand_like(ae.tensor([1, 2])),
        TypeError,
        "rand_like.*floating point",
    ),
    "ae.randn_like: integer input": Bad(
        lambda x: ae.randn_like(ae.tensor([1, 2])),
        TypeError,
        "randn_like.*floating point",
    ),
    "ae.manual_seed: str": Bad(
        lambda x: ae.manual_seed("a"), TypeError, "seed must be an int, got str"
    ),
    "ae.manual_seed: negative": Bad(lambda x: ae.manual_seed(-1), ValueError, "non-negative"),
    "ae.Generator: float seed": Bad(
        lambda x: ae.Generator(1.5),
        TypeError,
        "seed must be an int",
    ),
    "ae.Generator: negative seed": Bad(lambda x: ae.Generator(-1), ValueError, "non-negative"),
    "ae.device: unknown type": Bad(lambda x: ae.device("gpu"), ValueError, "unknown device 'gpu'"),
    "ae.device: str index": Bad(
        lambda x: ae.device("sim", "a"), TypeError, "a device index is an int, got str"
    ),
    "ae.Device: unknown type": Bad(lambda x: ae.Device("gpu"), ValueError, "unknown device 'gpu'"),
    "ae.Engine: negative depth limit": Bad(
        lambda x: ae.Engine(reentrant_depth_limit=-1),
        ValueError,
        "reentrant_depth_limit must be >= 1",
    ),
    "ae.Engine: str depth limit": Bad(
        lambda x: ae.Engine(reentrant_depth_limit="a"),
        TypeError,
        "reentrant_depth_limit must be an int",
    ),
    "ae.Engine: unknown overflow": Bad(
        lambda x: ae.Engine(reentrant_overflow="bogus"),
        ValueError,
        "reentrant_overflow must be 'thread' or 'task'",
    ),
    "ae.Engine: float offload_threads": Bad(
        lambda x: ae.Engine(offload_threads=2.5), TypeError, "offload_threads must be an int"
    ),
    "ae.Engine: on_node not callable": Bad(
        lambda x: ae.Engine(on_node=5), TypeError, r"on_node must be a callable \(node, where\)"
    ),
    "ae.Engine: sim_latency for a device that is not sim": Bad(
        lambda x: ae.Engine(sim_latency={"tpu": 0.1}),
        ValueError,
        "sim_latency: 'tpu' is not a sim device",
    ),
    "ae.Engine: zero max_inflight": Bad(
        lambda x: ae.Engine(max_inflight=0), ValueError, "max_inflight must be >= 1, got 0"
    ),
    "ae.Engine: float max_inflight": Bad(
        lambda x: ae.Engine(max_inflight=2.5), TypeError, "max_inflight must be an int"
    ),
    "ae.Engine: offload_backward not a bool": Bad(
        lambda x: ae.Engine(offload_backward="yes"),
        TypeError,
        "offload_backward must be a bool, got str 'yes'",
    ),
    "ae.Engine: zero blas_threads": Bad(
        lambda x: ae.Engine(blas_threads=0), ValueError, "blas_threads must be >= 1, got 0"
    ),
    "ae.Engine: str blas_threads": Bad(
        lambda x: ae.Engine(blas_threads="1"), TypeError, "blas_threads must be an int"
    ),
    "ae.Engine: negative time_slice": Bad(
        lambda x: ae.Engine(time_slice=-1), ValueError, "time_slice must be a positive number"
    ),
    "ae.Engine.run: not callable": Bad(
        lambda x: anyio.run(_engine_run, 5),
        TypeError,
        r"engine.run\(fn, \*args\) takes a callable first, got int 5",
    ),
    "ae.Engine.run: engine closed": Bad(
        lambda x: anyio.run(_closed_engine_run),
        ae.AutogradError,
        "engine.run\\(\\) was called on a closed ae.Engine",
    ),
    "ae.profile: progress not a callable": Bad(
        lambda x: ae.profile(progress="yes"),
        TypeError,
        "progress must be True, False or a callable",
    ),
    "ae.profile: progress_every not positive": Bad(
        lambda x: ae.profile(progress_every=0),
        ValueError,
        "progress_every must be a positive number",
    ),
    "ae.Engine: nan sim_latency": Bad(
        lambda x: ae.Engine(sim_latency=float("nan")),
        ValueError,
        "sim_latency must be a finite number of seconds, got nan",
    ),
    # -- elementwise and binary ops ----------------------------------------------------------
    "ae.add: str operand": Bad(lambda x: ae.add(x, "a"), TypeError, "not str 'a'"),
    "ae.add: operand of another shape": Bad(
        lambda x: ae.add(x, t(np.ones((3, 3)))), ValueError, r"shapes \(2,3\) \(3,3\)"
    ),
    "ae.sub: operand of another shape": Bad(
        lambda x: ae.sub(x, t(np.ones((3, 3)))), ValueError, r"shapes \(2,3\) \(3,3\)"
    ),
    "ae.mul: operand of another shape": Bad(
        lambda x: ae.mul(x, t(np.ones((3, 3)))), ValueError, r"shapes \(2,3\) \(3,3\)"
    ),
    "ae.div: str operand": Bad(lambda x: ae.div(x, "a"), TypeError, "not str 'a'"),
    "ae.pow: str exponent": Bad(lambda x: ae.pow(x, "a"), TypeError, "not str 'a'"),
    "ae.pow: exponent of another shape": Bad(
        lambda x: ae.pow(x, t(np.ones((3, 3)))), ValueError, r"shapes \(2,3\) \(3,3\)"
    ),
    "ae.maximum: operand of another shape": Bad(
        lambda x: ae.maximum(x, t(np.ones((3, 3)))), ValueError, "could not be broadcast"
    ),
    "ae.minimum: str operand": Bad(lambda x: ae.minimum(x, "a"), TypeError, "not str 'a'"),
    "ae.matmul: inner sizes differ": Bad(
        lambda x: ae.matmul(x, t(np.ones((2, 3)))),
        ValueError,
        r"shapes \(2, 3\) and \(2, 3\) cannot be multiplied",
    ),
    "ae.matmul: a 0-d operand": Bad(
        lambda x: ae.matmul(t(1.0), x), ValueError, "need to be at least 1D"
    ),
    "ae.mm: inner sizes differ": Bad(
        lambda x: ae.mm(x, t(np.ones((2, 3)))),
        ValueError,
        r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)",
    ),
    "ae.mm: a 1-d operand": Bad(
        lambda x: ae.mm(x, t(np.ones(3))), ValueError, "mat2 must be a matrix"
    ),
    "ae.dot: 2-d operands": Bad(
        lambda x: ae.dot(x, x), ValueError, "1D tensors expected, but got 2D and 2D tensors"
    ),
    "ae.dot: sizes that differ": Bad(
        lambda x: ae.dot(t(np.ones(2)), t(np.ones(3))), ValueError, "inconsistent tensor size"
    ),
    "ae.set_default_dtype: an integer dtype": Bad(
        lambda x: ae.set_default_dtype(ae.int64),
        TypeError,
        "only floating-point types are supported as the default type",
    ),
    "ae.set_default_dtype: unknown dtype": Bad(
        lambda x: ae.set_default_dtype("bogus"), TypeError, "not a dtype: 'bogus'"
    ),
    "ae.matmul: str operand": Bad(lambda x: ae.matmul("a", x), TypeError, "not str 'a'"),
    "ae.abs: str": Bad(lambda x: ae.abs("a"), TypeError, "not str 'a'"),
    "ae.neg: str": Bad(lambda x: ae.neg("a"), TypeError, "neg.*Tensor.*str"),
    "ae.sign: str": Bad(
        lambda x: ae.sign("a"),
        TypeError,
        "sign.*Tensor.*str",
    ),
    "ae.exp: str": Bad(lambda x: ae.exp("a"), TypeError, "not str 'a'"),
    "ae.expm1: str": Bad(lambda x: ae.expm1("a"), TypeError, "not str 'a'"),
    "ae.log: str": Bad(lambda x: ae.log("a"), TypeError, "not str 'a'"),
    "ae.log1p: str": Bad(lambda x: ae.log1p("a"), TypeError, "not str 'a'"),
    "ae.sqrt: str": Bad(lambda x: ae.sqrt("a"), TypeError, "not str 'a'"),
    "ae.square: str": Bad(lambda x: ae.square("a"), TypeError, "not str 'a'"),
    "ae.sin: str": Bad(lambda x: ae.sin("a"), TypeError, "not str 'a'"),
    "ae.cos: str": Bad(lambda x: ae.cos("a"), TypeError, "not str 'a'"),
    "ae.tanh: str": Bad(lambda x: ae.tanh("a"), TypeError, "not str 'a'"),
    "ae.sigmoid: None": Bad(lambda x: ae.sigmoid(None), TypeError, "not NoneType"),
    "ae.relu: str": Bad(lambda x: ae.relu("a"), TypeError, "not str 'a'"),
    "ae.clone: str": Bad(lambda x: ae.clone("a"), TypeError, "clone.*Tensor.*str"),
    "ae.clamp: neither min nor max": Bad(
        lambda x: ae.clamp(x), ValueError, "at least one of min or max"
    ),
    "ae.clamp: str bound": Bad(
        lambda x: ae.clamp(x, "a"),
        TypeError,
        "clamp.*min.*number",
    ),
    "ae.eq: operand of another shape": Bad(
        lambda x: ae.eq(x, t(np.ones((3, 3)))), ValueError, "could not be broadcast"
    ),
    "ae.ne: str operand": Bad(
        lambda x: ae.ne(x, "a"),
        TypeError,
        "not str 'a'",
    ),
    "ae.ge: operand of another shape": Bad(
        lambda x: ae.ge(x, t(np.ones((3, 3)))), ValueError, "could not be broadcast"
    ),
    "ae.gt: operand of another shape": Bad(
        lambda x: ae.gt(x, t(np.ones((3, 3)))), ValueError, "could not be broadcast"
    ),
    "ae.le: operand of another shape": Bad(
        lambda x: ae.le(x, t(np.ones((3, 3)))), ValueError, "could not be broadcast"
    ),
    "ae.lt: operand of another shape": Bad(
        lambda x: ae.lt(x, t(np.ones((3, 3)))), ValueError, "could not be broadcast"
    ),
    "ae.logical_and: str operand": Bad(
        lambda x: ae.logical_and(x > 0, "a"),
        TypeError,
        "not str 'a'",
    ),
    "ae.logical_or: str operand": Bad(
        lambda x: ae.logical_or(x > 0, "a"),
        TypeError,
        "not str 'a'",
    ),
    "ae.logical_not: str": Bad(
        lambda x: ae.logical_not("a"),
        TypeError,
        "logical_not.*Tensor.*str",
    ),
    "ae.where: float condition": Bad(
        lambda x: ae.where(x, x, x), TypeError, "where expected condition to be a boolean tensor"
    ),
    "ae.where: branches of other shapes": Bad(
        lambda x: ae.where(x > 0, x, t(np.ones((3, 3)))), ValueError, "could not be broadcast"
    ),
    "ae.where: str branch": Bad(
        lambda x: ae.where(x > 0, "a", x),
        TypeError,
        "not str 'a'",
    ),
    "ae.masked_fill: float mask": Bad(
        lambda x: ae.masked_fill(x, t(np.ones((2, 3))), 0.0),
        RuntimeError,
        "only supports boolean masks",
    ),
    "ae.masked_fill: str value": Bad(
        lambda x: ae.masked_fill(x, x > 0, "a"),
        TypeError,
        "masked_fill.*value.*number",
    ),
    "ae.masked_fill: str input": Bad(
        lambda x: ae.masked_fill("a", x > 0, 0.0),
        TypeError,
        "masked_fill.*Tensor.*str",
    ),
    # -- reductions ----------------------------------------------------------------------------
    "ae.sum: dim out of range": Bad(
        lambda x: ae.sum(x, 5),
        IndexError,
        r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)",
    ),
    "ae.sum: str input": Bad(
        lambda x: ae.sum("a"), TypeError, r"sum\(\): argument 'input' must be a Tensor"
    ),
    "ae.mean: dim out of range": Bad(lambda x: ae.mean(x, 5), IndexError, "Dimension out of range"),
    "ae.mean: integer input": Bad(
        lambda x: ae.mean(ae.tensor([1, 2])), TypeError, "could not infer output dtype"
    ),
    "ae.mean: str input": Bad(
        lambda x: ae.mean("a"),
        TypeError,
        r"mean\(\): argument 'input' must be a Tensor",
    ),
    "ae.prod: dim out of range": Bad(lambda x: ae.prod(x, 5), IndexError, "Dimension out of range"),
    "ae.prod: str input": Bad(
        lambda x: ae.prod("a"),
        TypeError,
        r"prod\(\): argument 'input' must be a Tensor",
    ),
    "ae.amax: dim out of range": Bad(lambda x: ae.amax(x, 5), IndexError, "Dimension out of range"),
    "ae.amax: str input": Bad(
        lambda x: ae.amax("a", 0),
        TypeError,
        r"amax\(\): argument 'input' must be a Tensor",
    ),
    "ae.amin: dim out of range": Bad(lambda x: ae.amin(x, 5), IndexError, "Dimension out of range"),
    "ae.max: dim out of range": Bad(lambda x: ae.max(x, 5), IndexError, "Dimension out of range"),
    "ae.max: str input": Bad(
        lambda x: ae.max("a"),
        TypeError,
        r"max\(\): argument 'input' must be a Tensor",
    ),
    "ae.min: str dim": Bad(lambda x: ae.min(x, "a"), TypeError, "dim must be an int, got str"),
    "ae.logsumexp: dim out of range": Bad(
        lambda x: ae.logsumexp(x, 5), IndexError, "Dimension out of range"
    ),
    "ae.logsumexp: str input": Bad(
        lambda x: ae.logsumexp("a", 0),
        TypeError,
        r"logsumexp\(\): argument 'input' must be a Tensor",
    ),
    "ae.softmax: dim out of range": Bad(
        lambda x: ae.softmax(x, 5), IndexError, "Dimension out of range"
    ),
    "ae.softmax: str input": Bad(
        lambda x: ae.softmax("a", 0),
        TypeError,
        r"softmax\(\): argument 'input' must be a Tensor",
    ),
    "ae.log_softmax: dim out of range": Bad(
        lambda x: ae.log_softmax(x, 5), IndexError, "Dimension out of range"
    ),
    "ae.norm: dim out of range": Bad(
        lambda x: ae.norm(x, dim=5), IndexError, "Dimension out of range"
    ),
    "ae.norm: unknown p": Bad(
        lambda x: ae.norm(x, p="bogus"), RuntimeError, "Order bogus not supported"
    ),
    "ae.norm: str input": Bad(
        lambda x: ae.norm("a"),
        TypeError,
        r"norm\(\): argument 'input' must be a Tensor",
    ),
    "ae.std: dim out of range": Bad(lambda x: ae.std(x, 5), IndexError, "Dimension out of range"),
    "ae.std: str input": Bad(
        lambda x: ae.std("a"),
        TypeError,
        r"std\(\): argument 'input' must be a Tensor",
    ),
    "ae.var: integer input": Bad(
        lambda x: ae.var(ae.tensor([1, 2])), TypeError, "expected a floating point input"
    ),
    "ae.var: str input": Bad(
        lambda x: ae.var("a"),
        TypeError,
        r"var\(\): argument 'input' must be a Tensor",
    ),
    # -- shapes, views, joins, indexing -----------------------------------------------------------
    "ae.reshape: size that does not fit": Bad(
        lambda x: ae.reshape(x, (4, 2)),
        ValueError,
        r"shape '\[4, 2\]' is invalid for input of size 6",
    ),
    "ae.reshape: two inferred sizes": Bad(
        lambda x: ae.reshape(x, (-1, -1)), ValueError, "only one dimension can be inferred"
    ),
    "ae.reshape: str input": Bad(
        lambda x: ae.reshape("a", (1,)),
        TypeError,
        r"reshape\(\): argument 'input' must be a Tensor",
    ),
    "ae.flatten: start after end": Bad(
        lambda x: ae.flatten(x, 1, 0), ValueError, "start_dim cannot come after end_dim"
    ),
    "ae.flatten: dim out of range": Bad(
        lambda x: ae.flatten(x, 0, 5), IndexError, "Dimension out of range"
    ),
    "ae.flatten: str input": Bad(
        lambda x: ae.flatten("a"),
        TypeError,
        r"flatten\(\): argument 'input' must be a Tensor",
    ),
    "ae.transpose: dim out of range": Bad(
        lambda x: ae.transpose(x, 0, 5), IndexError, "Dimension out of range"
    ),
    "ae.transpose: str dim": Bad(
        lambda x: ae.transpose(x, "a", 0), TypeError, "argument 'dim' must be an int, not str"
    ),
    "ae.permute: too few dims": Bad(
        lambda x: ae.permute(x, (0,)), ValueError, r"number of dims \(1\) does not match ndim \(2\)"
    ),
    "ae.permute: repeated dim": Bad(
        lambda x: ae.permute(x, (0, 0)), ValueError, "not a permutation"
    ),
    "ae.permute: str input": Bad(
        lambda x: ae.permute("a", (0,)),
        TypeError,
        r"permute\(\): argument 'input' must be a Tensor",
    ),
    "ae.squeeze: dim out of range": Bad(
        lambda x: ae.squeeze(x, 5), IndexError, "Dimension out of range"
    ),
    "ae.unsqueeze: dim out of range": Bad(
        lambda x: ae.unsqueeze(x, 5), IndexError, r"range of \[-3, 2\], but got 5"
    ),
    "ae.unsqueeze: str dim": Bad(
        lambda x: ae.unsqueeze(x, "a"), TypeError, "argument 'dim' must be an int, not str"
    ),
    "ae.expand: size that does not match": Bad(
        lambda x: ae.expand(x, (3, 3)),
        ValueError,
        r"The expanded size of the tensor \(3\) must match the existing size \(2\) at "
        r"non-singleton dimension 0\.  Target sizes: \[3, 3\]\.  Tensor sizes: \[2, 3\]",
    ),
    "ae.expand: fewer sizes than dims": Bad(
        lambda x: ae.expand(x, (3,)),
        ValueError,
        r"the number of sizes provided \(1\) must be greater or equal",
    ),
    "ae.expand: str input": Bad(
        lambda x: ae.expand("a", (2,)),
        TypeError,
        r"expand\(\): argument 'input' must be a Tensor",
    ),
    "ae.broadcast_to: fewer sizes than dims": Bad(
        lambda x: ae.broadcast_to(x, (3,)),
        ValueError,
        r"the number of sizes provided \(1\) must be greater or equal",
    ),
    "ae.cat: tensors of different ndim": Bad(
        lambda x: ae.cat([x, t(np.ones(3))]),
        ValueError,
        "Tensors must have same number of dimensions: got 2 and 1",
    ),
    "ae.cat: sizes that differ": Bad(
        lambda x: ae.cat([x, t(np.ones((2, 2)))], 0),
        ValueError,
        "Sizes of tensors must match except in dimension 0",
    ),
    "ae.cat: empty list": Bad(
        lambda x: ae.cat([]), ValueError, "expected a non-empty list of Tensors"
    ),
    "ae.cat: a tensor instead of a list": Bad(
        lambda x: ae.cat(x), TypeError, "expects a list or tuple of Tensors, got Tensor"
    ),
    "ae.cat: a str in the list": Bad(
        lambda x: ae.cat([x, "a"]), TypeError, "element 1 of the list is str"
    ),
    "ae.cat: dim out of range": Bad(
        lambda x: ae.cat([x, x], 5), IndexError, "Dimension out of range"
    ),
    "ae.stack: sizes that differ": Bad(
        lambda x: ae.stack([x, t(np.ones((3, 3)))]),
        ValueError,
        "stack expects each tensor to be equal size",
    ),
    "ae.stack: empty list": Bad(
        lambda x: ae.stack([]), ValueError, "expected a non-empty list of Tensors"
    ),
    "ae.stack: dim out of range": Bad(
        lambda x: ae.stack([x, x], 5), IndexError, r"range of \[-3, 2\], but got 5"
    ),
    "ae.chunk: zero chunks": Bad(
        lambda x: ae.chunk(x, 0), ValueError, "chunk expects `chunks` to be greater than 0"
    ),
    "ae.chunk: str chunks": Bad(
        lambda x: ae.chunk(x, "a"),
        TypeError,
        "chunks.*int",
    ),
    "ae.split: zero size": Bad(
        lambda x: ae.split(x, 0), ValueError, "split_size can only be 0 if dimension size is 0"
    ),
    "ae.split: sizes that do not sum up": Bad(
        lambda x: ae.split(x, [1, 1], 1),
        ValueError,
        "split_with_sizes expects split_sizes to sum exactly to 3",
    ),
    "ae.split: negative size": Bad(
        lambda x: ae.split(x, -1), ValueError, "split expects split_size be non-negative"
    ),
    "ae.split: str size": Bad(
        lambda x: ae.split(x, "a"),
        TypeError,
        "split_size.*int",
    ),
    "ae.unbind: dim out of range": Bad(
        lambda x: ae.unbind(x, 5), IndexError, "Dimension out of range"
    ),
    "ae.unbind: str input": Bad(
        lambda x: ae.unbind("a"),
        TypeError,
        r"unbind\(\): argument 'input' must be a Tensor",
    ),
    "ae.narrow: past the end": Bad(
        lambda x: ae.narrow(x, 0, 1, 5),
        RuntimeError,
        r"start \(1\) \+ length \(5\) exceeds dimension size \(2\)",
    ),
    "ae.narrow: negative length": Bad(
        lambda x: ae.narrow(x, 0, 0, -1), RuntimeError, "length must be non-negative"
    ),
    "ae.narrow: dim out of range": Bad(
        lambda x: ae.narrow(x, 5, 0, 1), IndexError, "Dimension out of range"
    ),
    "ae.select: index out of range": Bad(
        lambda x: ae.select(x, 0, 5),
        IndexError,
        r"select\(\): index 5 out of range for tensor of size \[2, 3\] at dimension 0",
    ),
    "ae.select: dim out of range": Bad(
        lambda x: ae.select(x, 5, 0), IndexError, "Dimension out of range"
    ),
    "ae.select: str index": Bad(
        lambda x: ae.select(x, 0, "a"),
        TypeError,
        "index.*int",
    ),
    "ae.gather: float index": Bad(
        lambda x: ae.gather(x, 0, t([[0.0, 0.0, 0.0]])),
        RuntimeError,
        "Expected dtype int64 for index",
    ),
    "ae.gather: index out of bounds": Bad(
        lambda x: ae.gather(x, 0, ae.tensor([[5, 0, 0]])),
        RuntimeError,
        "index 5 is out of bounds for dimension 0 with size 2",
    ),
    "ae.gather: index of another ndim": Bad(
        lambda x: ae.gather(x, 0, ae.tensor([[[0]]])),
        RuntimeError,
        "Index tensor must have the same number of dimensions",
    ),
    "ae.gather: dim out of range": Bad(
        lambda x: ae.gather(x, 5, ae.tensor([[0, 0, 0]])), IndexError, "Dimension out of range"
    ),
    "ae.index_select: index out of bounds": Bad(
        lambda x: ae.index_select(x, 0, ae.tensor([5])),
        IndexError,
        "index 5 is out of bounds for dimension 0 with size 2",
    ),
    "ae.index_select: float index": Bad(
        lambda x: ae.index_select(x, 0, t([0.0])), RuntimeError, "Expected dtype int64 for index"
    ),
    "ae.index_select: str input": Bad(
        lambda x: ae.index_select("a", 0, ae.tensor([0])),
        TypeError,
        "index_select.*Tensor.*str",
    ),
    "ae.take_along_dim: float index": Bad(
        lambda x: ae.take_along_dim(x, t([[0.0]]), 0),
        RuntimeError,
        "Expected dtype int64 for index",
    ),
    "ae.take_along_dim: dim out of range": Bad(
        lambda x: ae.take_along_dim(x, ae.tensor([[0]]), 5), IndexError, "Dimension out of range"
    ),
    # -- autograd entry points -----------------------------------------------------------------
    "ae.sync.backward: str": Bad(
        lambda x: ae.sync.backward("a"),
        TypeError,
        "tensors must be a Tensor or a sequence of Tensors, got str",
    ),
    "ae.sync.backward: a str among the tensors": Bad(
        lambda x: ae.sync.backward([(x * 2).sum(), "a"]), TypeError, "got str at position 1"
    ),
    "ae.sync.backward: no tensors": Bad(
        lambda x: ae.sync.backward([]), ae.AutogradError, "needs at least one tensor"
    ),
    "ae.sync.backward: str gradient": Bad(
        lambda x: ae.sync.backward(x * 2, "a"),
        TypeError,
        "grad_tensors must be a Tensor or a sequence of Tensors",
    ),
    "ae.sync.backward: gradient of another shape": Bad(
        lambda x: ae.sync.backward(x * 2, t(np.ones(3))),
        ae.AutogradError,
        r"Mismatch in shape: grad_output\[0\] has a shape of \(3,\)",
    ),
    "ae.sync.backward: more gradients than tensors": Bad(
        lambda x: ae.sync.backward([x * 2], [t(np.ones((2, 3))), t(np.ones((2, 3)))]),
        ae.AutogradError,
        "got 2 gradients for 1 tensors",
    ),
    "ae.sync.backward: implicit gradient of a non-scalar": Bad(
        lambda x: ae.sync.backward(x * 2),
        ae.AutogradError,
        "grad can be implicitly created only for scalar outputs",
    ),
    "ae.sync.backward: a tensor outside the graph": Bad(
        lambda x: ae.sync.backward(t(1.0)),
        ae.AutogradError,
        "does not require grad and does not have a grad_fn",
    ),
    "ae.sync.backward: str inputs": Bad(
        lambda x: ae.sync.backward((x * 2).sum(), inputs="a"),
        TypeError,
        "inputs must be a Tensor or a sequence of Tensors",
    ),
    "ae.sync.backward: a str among the inputs": Bad(
        lambda x: ae.sync.backward((x * 2).sum(), inputs=[x, "a"]),
        TypeError,
        "inputs must be Tensors, got str",
    ),
    "ae.sync.backward: empty inputs": Bad(
        lambda x: ae.sync.backward((x * 2).sum(), inputs=[]), ae.AutogradError, "cannot be empty"
    ),
    "ae.sync.backward: an input that does not require grad": Bad(
        lambda x: ae.sync.backward((x * 2).sum(), inputs=[t([1.0])]),
        ae.AutogradError,
        "does not require grad",
    ),
    "ae.sync.grad: str outputs": Bad(
        lambda x: ae.sync.grad("a", x),
        TypeError,
        "outputs must be a Tensor or a sequence of Tensors, got str",
    ),
    "ae.sync.grad: str inputs": Bad(
        lambda x: ae.sync.grad((x * 2).sum(), "a"),
        TypeError,
        "inputs must be a Tensor or a sequence of Tensors, got str",
    ),
    "ae.sync.grad: a node (a list of its next nodes) as inputs": Bad(
        lambda x: ae.sync.grad((x * 2).sum(), (x * 3).grad_fn),
        TypeError,
        "inputs must be a Tensor or a sequence of Tensors, got MulBackward0",
    ),
    "ae.sync.backward: a node as tensors": Bad(
        lambda x: ae.sync.backward((x * 2).sum().grad_fn),
        TypeError,
        "tensors must be a Tensor or a sequence of Tensors, got SumBackward0",
    ),
    "ae.sync.grad: a str among the inputs": Bad(
        lambda x: ae.sync.grad((x * 2).sum(), [x, "a"]),
        TypeError,
        "inputs must be Tensors, got str",
    ),
    "ae.sync.grad: str grad_outputs": Bad(
        lambda x: ae.sync.grad(x * 2, x, "a"),
        TypeError,
        "grad_outputs must be a Tensor or a sequence of Tensors",
    ),
    "ae.sync.grad: more grad_outputs than outputs": Bad(
        lambda x: ae.sync.grad([x * 2], x, [t(np.ones((2, 3))), t(np.ones((2, 3)))]),
        ae.AutogradError,
        "grad_outputs has 2 entries for 1 outputs",
    ),
    "ae.sync.grad: empty outputs": Bad(
        lambda x: ae.sync.grad([], x), ValueError, "grad requires non-empty outputs"
    ),
    "ae.sync.grad: unused input": Bad(
        lambda x: ae.sync.grad((x * 2).sum(), [x, t([1.0], requires_grad=True)]),
        ae.AutogradError,
        "appears to not have been used in the graph",
    ),
    "ae.sync.grad: materialize_grads with allow_unused=False": Bad(
        lambda x: ae.sync.grad((x * 2).sum(), x, allow_unused=False, materialize_grads=True),
        ValueError,
        "Expected allow_unused to be True or not passed",
    ),
    "ae.sync.grad: an input that does not require grad": Bad(
        lambda x: ae.sync.grad((x * 2).sum(), t([1.0])), ae.AutogradError, "does not require grad"
    ),
    "ae.backward: called where no event loop runs": Bad(
        lambda x: ae.backward((x * 2).sum()),
        ae.AutogradError,
        r"call ae\.sync\.backward\(\.\.\.\) in plain code",
    ),
    "ae.backward: str, awaited": Bad(
        lambda x: in_loop(ae.backward, "a"),
        TypeError,
        "tensors must be a Tensor or a sequence of Tensors, got str",
    ),
    "ae.backward: gradient of another shape, awaited": Bad(
        lambda x: in_loop(ae.backward, x * 2, t(np.ones(3))), ae.AutogradError, "Mismatch in shape"
    ),
    "ae.grad: called where no event loop runs": Bad(
        lambda x: ae.grad((x * 2).sum(), [x]),
        ae.AutogradError,
        r"call ae\.sync\.grad\(\.\.\.\) in plain code",
    ),
    "ae.grad: str outputs, awaited": Bad(
        lambda x: in_loop(ae.grad, "a", x),
        TypeError,
        "outputs must be a Tensor or a sequence of Tensors, got str",
    ),
    "ae.grad: unused input, awaited": Bad(
        lambda x: in_loop(ae.grad, (x * 2).sum(), [x, t([1.0], requires_grad=True)]),
        ae.AutogradError,
        "appears to not have been used",
    ),
    "ae.queue_callback: outside a backward": Bad(
        lambda x: ae.queue_callback(lambda: None),
        ae.AutogradError,
        "Final callbacks can only be installed during backward pass.",
    ),
    "ae.queue_callback: not callable": Bad(
        lambda x: backward_through(x, lambda g: ae.queue_callback(5)),
        ae.BackwardError,
        "queue_callback expects a callable, got int",
    ),
    "ae.checkpoint: not callable": Bad(
        lambda x: ae.checkpoint("a", x, use_reentrant=True),
        TypeError,
        "checkpoint needs a callable, got str",
    ),
    "ae.checkpoint: a determinism_check it does not know": Bad(
        lambda x: ae.checkpoint(lambda v: v * 2, x, use_reentrant=False, determinism_check="x"),
        ValueError,
        "determinism_check should be one of",
    ),
    "ae.set_checkpoint_early_stop: not a bool": Bad(
        lambda x: ae.set_checkpoint_early_stop("no"),
        TypeError,
        "set_checkpoint_early_stop expects a bool, got str",
    ),
    "ae.set_checkpoint_debug_enabled: not a bool": Bad(
        lambda x: ae.set_checkpoint_debug_enabled(1),
        TypeError,
        "set_checkpoint_debug_enabled expects a bool or None, got int",
    ),
    "ae.GraphExecGroup: nested": Bad(
        lambda x: _nested_exec_groups(),
        RuntimeError,
        "GraphExecGroup contexts cannot be nested",
    ),
    "ae.checkpoint_sequential: no segments": Bad(
        lambda x: ae.checkpoint_sequential([lambda v: v * 2], 0, x, use_reentrant=False),
        ValueError,
        "segments must be a positive int",
    ),
    "ae.checkpoint: unknown keyword": Bad(
        lambda x: ae.checkpoint(lambda v: v * 2, x, bogus=1, use_reentrant=True),
        ValueError,
        "Unexpected keyword arguments: bogus",
    ),
    "ae.checkpoint: followed by ae.sync.grad": Bad(
        lambda x: ae.sync.grad(ae.checkpoint(lambda v: v.exp(), x, use_reentrant=True).sum(), [x]),
        ae.AutogradError,
        "checkpoint is incompatible with ae.grad",
    ),
    "ae.register_multi_grad_hook: str tensors": Bad(
        lambda x: ae.register_multi_grad_hook("ab", lambda g: None),
        TypeError,
        "expects Tensors, got str",
    ),
    "ae.register_multi_grad_hook: a non-tensor": Bad(
        lambda x: ae.register_multi_grad_hook((x, 5), lambda g: None),
        TypeError,
        "expects Tensors, got int",
    ),
    "ae.register_multi_grad_hook: unknown mode": Bad(
        lambda x: ae.register_multi_grad_hook((x,), lambda g: None, mode="foo"),
        ValueError,
        r"Expects mode to be one of \('all', 'any'\) but got foo",
    ),
    "ae.register_multi_grad_hook: a hook that is not callable": Bad(
        lambda x: (ae.register_multi_grad_hook((x,), 5), ae.sync.backward((x * 2).sum())),
        ae.BackwardError,
        "'int' object is not callable",
    ),
    "ae.set_grad_enabled: not a bool": Bad(
        lambda x: ae.set_grad_enabled(1), TypeError, "set_grad_enabled expects a bool, got int"
    ),
    "ae.no_grad: an argument that is not a function": Bad(
        lambda x: ae.no_grad(5), TypeError, "no_grad.*takes no arguments"
    ),
    "ae.enable_grad: an argument that is not a function": Bad(
        lambda x: ae.enable_grad(5), TypeError, "enable_grad.*takes no arguments"
    ),
    "ae.inference_mode: a mode that is not a bool": Bad(
        lambda x: ae.inference_mode("yes"), TypeError, "inference_mode.*takes a bool mode"
    ),
    "ae.detect_anomaly: check_nan not a bool": Bad(
        lambda x: _enter_anomaly("x"),
        TypeError,
        "check_nan.*bool",
    ),
    "ae.set_detect_anomaly: mode not a bool": Bad(
        lambda x: ae.set_detect_anomaly("on"),
        TypeError,
        "set_detect_anomaly.*'mode' must be bool, not str",
    ),
    "ae.once_differentiable: not a function": Bad(
        lambda x: ae.once_differentiable(5),
        TypeError,
        "once_differentiable.*callable",
    ),
    "ae.Function: instantiated": Bad(
        lambda x: function_with(lambda ctx, v: v * 1)(),
        TypeError,
        r"do not instantiate it, call Custom\.apply",
    ),
    "ae.Function: save_for_backward of a number": Bad(
        lambda x: function_with(lambda ctx, v: (ctx.save_for_backward(3), v * 1)[1]).apply(x),
        TypeError,
        "save_for_backward can only save tensors or None",
    ),
    "ae.Function: mark_dirty of a number": Bad(
        lambda x: function_with(lambda ctx, v: (ctx.mark_dirty(3), v * 1)[1]).apply(x),
        TypeError,
        "mark_dirty can only accept tensors",
    ),
    "ae.Function: mark_non_differentiable of a str": Bad(
        lambda x: function_with(lambda ctx, v: (ctx.mark_non_differentiable("a"), v * 1)[1]).apply(
            x
        ),
        TypeError,
        "mark_non_differentiable only accepts tensors",
    ),
    "ae.Function: set_materialize_grads of a str": Bad(
        lambda x: function_with(lambda ctx, v: (ctx.set_materialize_grads("a"), v * 1)[1]).apply(x),
        TypeError,
        "set_materialize_grads.*bool",
    ),
    "ae.Function: a gradient of the wrong shape": Bad(
        lambda x: ae.sync.backward(_wrong_shape_function().apply(x).sum()),
        ae.AutogradError,
        "returned an invalid gradient at index 0",
    ),
    # -- gradcheck, gradgradcheck ----------------------------------------------------------------
    "ae.sync.gradcheck: not callable": Bad(
        lambda x: ae.sync.gradcheck("a", (x,)), TypeError, "'str' object is not callable"
    ),
    "ae.sync.gradcheck: str inputs": Bad(
        lambda x: ae.sync.gradcheck(lambda v: v * 2, "a"),
        TypeError,
        "inputs must be a Tensor or a tuple of Tensors, got str",
    ),
    "ae.sync.gradcheck: no input requires grad": Bad(
        lambda x: ae.sync.gradcheck(lambda v: v, (t([1.0]),)),
        ValueError,
        "at least one input tensor to require gradient",
    ),
    "ae.autograd.forward_ad.make_dual: outside a dual level": Bad(
        lambda x: ae.autograd.forward_ad.make_dual(x, t([1.0])),
        RuntimeError,
        "no level exists, make sure to enter_dual_level",
    ),
    "ae.autograd.forward_ad.make_dual: a tangent of another shape": Bad(
        lambda x: _in_dual_level(lambda: ae.autograd.forward_ad.make_dual(x, t([1.0, 2.0, 3.0]))),
        RuntimeError,
        "different size than that of the original Tensor",
    ),
    "ae.sync.gradcheck: a result that is not a tensor": Bad(
        lambda x: ae.sync.gradcheck(lambda v: "a", (x,)),
        TypeError,
        "result must be a Tensor or a tuple of Tensors, got str",
    ),
    "ae.sync.gradcheck: an input with a stride-0 dimension": Bad(
        lambda x: ae.sync.gradcheck(lambda v: v, (t([1.0], requires_grad=True).expand(2, 2),)),
        RuntimeError,
        "dimension with stride 0",
    ),
    "ae.sync.gradcheck: eps=0": Bad(
        lambda x: ae.sync.gradcheck(lambda v: v * 2, (x,), eps=0),
        ValueError,
        "eps must be positive",
    ),
    "ae.sync.gradcheck: str eps": Bad(
        lambda x: ae.sync.gradcheck(lambda v: v * 2, (x,), eps="a"),
        TypeError,
        "eps must be a number",
    ),
    "ae.sync.gradgradcheck: grad_outputs of another shape": Bad(
        lambda x: ae.sync.gradgradcheck(
            lambda v: v * 2, (x,), (t(np.ones(3), requires_grad=True),)
        ),
        ae.AutogradError,
        "Mismatch in shape",
    ),
    "ae.sync.gradgradcheck: more grad_outputs than outputs": Bad(
        lambda x: ae.sync.gradgradcheck(
            lambda v: v * 2, (x,), (t(np.ones((2, 3))), t(np.ones((2, 3))))
        ),
        ae.AutogradError,
        "grad_outputs has 2 entries",
    ),
    "ae.gradcheck: called where no event loop runs": Bad(
        lambda x: ae.gradcheck(lambda v: v, (x,)), ae.AutogradError, r"ae\.sync\.gradcheck"
    ),
    "ae.gradcheck: no input requires grad, awaited": Bad(
        lambda x: in_loop(ae.gradcheck, lambda v: v, (t([1.0]),)),
        ValueError,
        "at least one input tensor",
    ),
    "ae.gradgradcheck: called where no event loop runs": Bad(
        lambda x: ae.gradgradcheck(lambda v: v, (x,)), ae.AutogradError, r"ae\.sync\.gradgradcheck"
    ),
    "ae.gradgradcheck: str inputs, awaited": Bad(
        lambda x: in_loop(ae.gradgradcheck, lambda v: v, "a"),
        TypeError,
        "inputs must be a Tensor or a tuple of Tensors",
    ),
}


def _enter_anomaly(check_nan: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ae.detect_anomaly(check_nan=check_nan):
            pass


def _wrong_shape_function() -> Any:
    class WrongShape(ae.Function):
        @staticmethod
        def forward(ctx: Any, v: Any) -> Any:
            return v * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return t(np.ones(10))

    return WrongShape


# -- ae.functional and ae.sync.functional: the same rows for both spellings ------------------------


def _functional_rows(prefix: str, run: Callable[..., Any]) -> dict[str, Bad]:
    def vjp_of(fn: Any, inputs: Any, *args: Any, **kwargs: Any) -> Callable[[str], Any]:
        return lambda name: run(name, fn, inputs, *args, **kwargs)

    rows: dict[str, Bad] = {}
    for name in ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"):
        v = (t(np.ones((2, 3))),) if name in ("vjp", "jvp", "vhp", "hvp") else ()
        fn = (lambda a: a.sum()) if name in ("hessian", "vhp", "hvp") else (lambda a: a * 2)
        rows[f"{prefix}.{name}: not callable"] = Bad(
            lambda x, name=name, v=v: run(name, "a", x, *v),
            TypeError,
            "'str' object is not callable",
        )
        rows[f"{prefix}.{name}: inputs that are not tensors"] = Bad(
            lambda x, name=name, v=v, fn=fn: run(name, fn, (x, 2), *v),
            TypeError,
            f"The inputs given to {name} must be either a Tensor or a tuple of Tensors",
        )
        rows[f"{prefix}.{name}: a result that is not a tensor"] = Bad(
            lambda x, name=name, v=v: run(name, lambda a: (a * 2, "bar"), x, *v),
            TypeError,
            f"The outputs of the user-provided function given to {name} must",
        )
        if v:
            rows[f"{prefix}.{name}: v of another shape"] = Bad(
                lambda x, name=name, fn=fn: run(name, fn, x, t(np.ones(3))),
                RuntimeError,
                r"v has invalid size: should be \(2, 3\) but got \(3,\)",
            )
            rows[f"{prefix}.{name}: v that is not a tensor"] = Bad(
                lambda x, name=name, fn=fn: run(name, fn, x, "a"),
                TypeError,
                f"The v given to {name} must be either a Tensor or a tuple of Tensors",
            )
    rows[f"{prefix}.vjp: v missing for a non-scalar result"] = Bad(
        lambda x: run("vjp", lambda a: a * 2, x), RuntimeError, "The vector v can only be None if"
    )
    rows[f"{prefix}.hessian: a result with several elements"] = Bad(
        lambda x: run("hessian", lambda a: a * 2, x),
        RuntimeError,
        "should contain a single element",
    )
    rows[f"{prefix}.jacobian: unknown strategy"] = Bad(
        lambda x: run("jacobian", lambda a: a, x, strategy="bogus"),
        ValueError,
        'Expected strategy to be either "forward-mode" or "reverse-mode"',
    )
    rows[f"{prefix}.jacobian: forward-mode strategy"] = Bad(
        lambda x: run("jacobian", lambda a: a, x, strategy="forward-mode"),
        NotImplementedError,
        "only implemented for `vectorize=True`",
    )
    rows[f"{prefix}.jacobian: strict with vectorize"] = Bad(
        lambda x: run("jacobian", lambda a: a, x, strict=True, vectorize=True),
        RuntimeError,
        "not supported together",
    )
    rows[f"{prefix}.hessian: unknown outer strategy"] = Bad(
        lambda x: run("hessian", lambda a: a.sum(), x, outer_jacobian_strategy="bogus"),
        ValueError,
        "Expected strategy to be either",
    )
    return rows


def _sync_functional(name: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(ae.sync.functional, name)(*args, **kwargs)


def _awaited_functional(name: str, *args: Any, **kwargs: Any) -> Any:
    return in_loop(getattr(ae.functional, name), *args, **kwargs)


TABLE.update(_functional_rows("ae.sync.functional", _sync_functional))
TABLE.update(_functional_rows("ae.functional", _awaited_functional))
TABLE["ae.functional.vjp: called where no event loop runs"] = Bad(
    lambda x: ae.functional.vjp(lambda a: a, x, x), ae.AutogradError, r"ae\.sync\.functional\.vjp"
)

# -- ae.viz ----------------------------------------------------------------------------------------

TABLE.update(
    {
        "ae.viz.to_dot: an array": Bad(
            lambda x: ae.viz.to_dot(x.data), TypeError, "expected a Tensor or a sequence"
        ),
        "ae.viz.to_dot: a list with a float": Bad(
            lambda x: ae.viz.to_dot([x, 1.0]), TypeError, "element 1 is float"
        ),
        "ae.viz.to_dot: an empty list": Bad(
            lambda x: ae.viz.to_dot([]), ValueError, "pass at least one Tensor"
        ),
        "ae.viz.to_dot: params a list of tensors": Bad(
            lambda x: ae.viz.to_dot(x, params=[x]), TypeError, r"\(name, Tensor\) pairs"
        ),
        "ae.viz.to_dot: params with an array": Bad(
            lambda x: ae.viz.to_dot(x, params={"x": x.data}), TypeError, "must be a Tensor"
        ),
        "ae.viz.to_dot: show_saved not a bool": Bad(
            lambda x: ae.viz.to_dot(x, show_saved="yes"), TypeError, "show_saved must be a bool"
        ),
        "ae.viz.render: a tensor as dot": Bad(
            lambda x: ae.viz.render(x, "g.svg"), TypeError, "dot must be DOT text"
        ),
        "ae.viz.render: pdf": Bad(
            lambda x: ae.viz.render(ae.viz.to_dot(x), "g.pdf", "pdf"), ValueError, "'svg' or 'png'"
        ),
    }
)

# -- Tensor methods and fields ---------------------------------------------------------------------

TABLE.update(
    {
        "Tensor.backward: str gradient": Bad(
            lambda x: x.backward("a"), TypeError, "grad_tensors must be a Tensor"
        ),
        "Tensor.backward: gradient of another shape": Bad(
            lambda x: (x * 2).backward(t(np.ones(3))), ae.AutogradError, "Mismatch in shape"
        ),
        "Tensor.backward: str inputs": Bad(
            lambda x: (x * 2).sum().backward(inputs="a"),
            TypeError,
            "inputs must be a Tensor or a sequence",
        ),
        "Tensor.backward: a tensor outside the graph": Bad(
            lambda x: t(1.0).backward(), ae.AutogradError, "does not require grad"
        ),
        "Tensor.register_hook: a hook that is not callable (fails in the backward)": Bad(
            lambda x: (x.register_hook(5), ae.sync.backward((x * 2).sum())),
            ae.BackwardError,
            "'int' object is not callable",
        ),
        "Tensor.register_hook: on a tensor that does not require grad": Bad(
            lambda x: t([1.0]).register_hook(lambda g: g),
            ae.AutogradError,
            "cannot register a hook on a tensor that doesn't require gradient",
        ),
        "Tensor.register_hook: a hook returning another shape": Bad(
            lambda x: backward_through(x, lambda g: g.sum()),
            ae.AutogradError,
            "has changed the size of value",
        ),
        "Tensor.register_hook: a hook returning a number": Bad(
            lambda x: backward_through(x, lambda g: 3),
            ae.BackwardError,
            "must return a Tensor or None",
        ),
        "Tensor.register_post_accumulate_grad_hook: on a non-leaf": Bad(
            lambda x: (x * 2).register_post_accumulate_grad_hook(lambda p: None),
            ae.AutogradError,
            "cannot be registered on non-leaf tensors",
        ),
        "Tensor.register_post_accumulate_grad_hook: a hook that is not callable (fails at commit)": Bad(
            lambda x: (x.register_post_accumulate_grad_hook(5), ae.sync.backward((x * 2).sum())),
            TypeError,
            "'int' object is not callable",
            keeps_grad=False,  # the hook runs after .grad was written, as in PyTorch
        ),
        "Tensor.register_post_accumulate_grad_hook: a hook returning a value": Bad(
            lambda x: (
                x.register_post_accumulate_grad_hook(lambda p: 1),
                ae.sync.backward((x * 2).sum()),
            ),
            ae.AutogradError,
            "hooks should return None.",
            keeps_grad=False,
        ),
        "Tensor.retain_grad: on a tensor that does not require grad": Bad(
            lambda x: t([1.0]).retain_grad(),
            ae.AutogradError,
            "can't retain_grad on Tensor that has requires_grad=False",
        ),
        "Tensor.requires_grad_: on a non-leaf": Bad(
            lambda x: (x * 2).requires_grad_(False),
            ae.AutogradError,
            "you can only change requires_grad flags of leaf",
        ),
        "Tensor.requires_grad_: on integers": Bad(
            lambda x: ae.tensor([1, 2]).requires_grad_(),
            ae.AutogradError,
            "only Tensors of floating point",
        ),
        "Tensor.requires_grad_: not a bool": Bad(
            lambda x: t([1.0]).requires_grad_("yes"),
            TypeError,
            "requires_grad.*bool",
        ),
        "Tensor.requires_grad: set to a str": Bad(
            lambda x: setattr(t([1.0]), "requires_grad", "yes"),
            TypeError,
            "requires_grad must be a bool",
        ),
        "Tensor.grad: set to a str": Bad(
            lambda x: setattr(x, "grad", "a"),
            TypeError,
            "assigned grad expected to be a Tensor or None",
        ),
        "Tensor.grad: set to another shape": Bad(
            lambda x: setattr(x, "grad", t(np.ones(3))),
            ae.AutogradError,
            r"attempting to assign a gradient of size '\[3\]'",
        ),
        "Tensor.grad: set to another dtype": Bad(
            lambda x: setattr(x, "grad", ae.ones(2, 3, dtype=ae.float32)),
            ae.AutogradError,
            "attempting to assign a gradient with dtype 'float32'",
        ),
        "Tensor.grad: set to the tensor itself": Bad(
            lambda x: setattr(x, "grad", x),
            ae.AutogradError,
            "can't assign Variable as its own grad",
        ),
        "Tensor.numpy: requires grad": Bad(
            lambda x: x.numpy(),
            ae.AutogradError,
            r"Can't call numpy\(\) on Tensor that requires grad",
        ),
        "Tensor.item: several elements": Bad(
            lambda x: x.item(), ValueError, "a Tensor with 6 elements cannot be converted to Scalar"
        ),
        "Tensor.__float__: several elements": Bad(
            lambda x: float(x), ValueError, "cannot be converted to Scalar"
        ),
        "Tensor.__bool__: several elements": Bad(
            lambda x: bool(x),
            ValueError,
            "^Boolean value of Tensor with more than one value is ambiguous",
        ),
        "Tensor.__bool__: the advice it gives can be followed": Bad(
            lambda x: _bool_advice(x),
            ValueError,
            "advice followed",
        ),
        "Tensor.__bool__: no elements": Bad(
            lambda x: bool(ae.ones(0)), ValueError, "^Boolean value of Tensor with no values"
        ),
        "Tensor.any: dim out of range": Bad(
            lambda x: x.any(5),
            IndexError,
            r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)",
        ),
        "Tensor.any: str dim": Bad(
            lambda x: x.any("a"), TypeError, "argument 'dim' must be an int"
        ),
        "Tensor.all: a dim twice": Bad(
            lambda x: x.all((0, 0)), ValueError, "appears multiple times in the list of dims"
        ),
        "Tensor.all: str keepdim": Bad(
            lambda x: x.all(0, "a"), TypeError, r"all\(\): argument 'keepdim' must be a bool"
        ),
        "Tensor.data: set to None": Bad(
            lambda x: setattr(nonleaf(x), "data", None),
            TypeError,
            "data.*Tensor",
            unclear=f"{_ACCEPTED} (.data is the raw array and its setter checks nothing)",
        ),
        "Tensor.__len__: 0-d": Bad(lambda x: len(t(1.0)), TypeError, "len\\(\\) of a 0-d tensor"),
        "Tensor.__iter__: 0-d": Bad(
            lambda x: list(t(1.0)), TypeError, "iteration over a 0-d tensor"
        ),
        "Tensor.__getitem__: index out of bounds": Bad(
            lambda x: x[5], IndexError, "index 5 is out of bounds for dimension 0 with size 2"
        ),
        "Tensor.__getitem__: too many indices": Bad(
            lambda x: x[0, 0, 0], IndexError, "too many indices for tensor of dimension 2"
        ),
        "Tensor.__getitem__: float index": Bad(
            lambda x: x[1.5], IndexError, r"valid indices \(got float\)"
        ),
        "Tensor.__getitem__: str index": Bad(
            lambda x: x["a"], IndexError, r"valid indices \(got str\)"
        ),
        "Tensor.__getitem__: boolean mask of another shape": Bad(
            lambda x: x[ae.tensor([True, False, True])], IndexError, "boolean index did not match"
        ),
        "Tensor.__getitem__: index list out of bounds": Bad(
            lambda x: x[[0, 5]], IndexError, "index 5 is out of bounds"
        ),
        "Tensor.__setitem__: a leaf that requires grad": Bad(
            lambda x: x.__setitem__(0, 1.0),
            ae.AutogradError,
            "a view of a leaf Variable that requires grad",
        ),
        "Tensor.__setitem__: value of another shape": Bad(
            lambda x: nonleaf(x).__setitem__(0, t(np.ones(4))),
            ValueError,
            r"the operand of shape \[4\] cannot be broadcast to the shape \[3\]",
        ),
        "Tensor.to: unknown device": Bad(lambda x: x.to("gpu"), ValueError, "unknown device 'gpu'"),
        "Tensor.to: unknown dtype": Bad(
            lambda x: x.to(dtype="float17"), TypeError, "not a dtype: 'float17'"
        ),
        "Tensor.to: an int": Bad(lambda x: x.to(5), TypeError, "not a dtype: 5"),
        "Tensor.view: size that does not fit": Bad(
            lambda x: x.view(4, 2), ValueError, r"shape '\[4, 2\]' is invalid for input of size 6"
        ),
        "Tensor.view: of a transposed tensor": Bad(
            lambda x: x.transpose(0, 1).view(6),
            ValueError,
            r"view size is not compatible.*Use \.reshape",
        ),
        "Tensor.view_as: str": Bad(
            lambda x: x.view_as("a"),
            TypeError,
            r"view_as\(\): argument 'other' must be a Tensor",
        ),
        "Tensor.reshape_as: str": Bad(
            lambda x: x.reshape_as("a"),
            TypeError,
            r"reshape_as\(\): argument 'other' must be a Tensor",
        ),
        "Tensor.expand_as: str": Bad(
            lambda x: x.expand_as("a"),
            TypeError,
            r"expand_as\(\): argument 'other' must be a Tensor",
        ),
        "Tensor.type_as: str": Bad(
            lambda x: x.type_as("a"),
            TypeError,
            r"type_as\(\): argument 'other' must be a Tensor",
        ),
        "Tensor.reshape: str size": Bad(
            lambda x: x.reshape("a"), TypeError, "argument 'shape' must be a tuple of ints"
        ),
        "Tensor.size: dim out of range": Bad(
            lambda x: x.size(5), IndexError, "Dimension out of range"
        ),
        "Tensor.size: str dim": Bad(
            lambda x: x.size("a"), TypeError, r"size\(\): argument 'dim' must be an int, not str"
        ),
        "Tensor.mT: on a 1-d tensor": Bad(
            lambda x: t([1.0, 2.0]).mT,
            ValueError,
            r"^tensor\.mT is only supported on matrices or batches of matrices\. Got 1-D tensor\.$",
        ),
        "Tensor.broadcast_to: a size that does not match": Bad(
            lambda x: x.broadcast_to((2, 4)),
            ValueError,
            r"The expanded size of the tensor \(4\) must match the existing size \(3\) at "
            r"non-singleton dimension 1\.",
        ),
        "Tensor.add_: on a leaf that requires grad": Bad(
            lambda x: x.add_(1),
            ae.AutogradError,
            "a leaf Variable that requires grad is being used in an in-place operation.",
        ),
        "Tensor.sub_: on a leaf that requires grad": Bad(
            lambda x: x.sub_(1), ae.AutogradError, "a leaf Variable that requires grad"
        ),
        "Tensor.mul_: on a leaf that requires grad": Bad(
            lambda x: x.mul_(2), ae.AutogradError, "a leaf Variable that requires grad"
        ),
        "Tensor.div_: on a leaf that requires grad": Bad(
            lambda x: x.div_(2), ae.AutogradError, "a leaf Variable that requires grad"
        ),
        "Tensor.clamp_: on a leaf that requires grad": Bad(
            lambda x: x.clamp_(0, 1), ae.AutogradError, "a leaf Variable that requires grad"
        ),
        "Tensor.relu_: on a leaf that requires grad": Bad(
            lambda x: x.relu_(), ae.AutogradError, "a leaf Variable that requires grad"
        ),
        "Tensor.fill_: on a leaf that requires grad": Bad(
            lambda x: x.fill_(0), ae.AutogradError, "a leaf Variable that requires grad"
        ),
        "Tensor.zero_: on a leaf that requires grad": Bad(
            lambda x: x.zero_(), ae.AutogradError, "a leaf Variable that requires grad"
        ),
        "Tensor.copy_: on a leaf that requires grad": Bad(
            lambda x: x.copy_(t(np.ones((2, 3)))),
            ae.AutogradError,
            "a leaf Variable that requires grad",
        ),
        "Tensor.copy_: source of another shape": Bad(
            lambda x: nonleaf(x).copy_(t(np.ones((3, 3)))),
            ValueError,
            r"operand of shape \[3, 3\] cannot be broadcast",
        ),
        "Tensor.copy_: str source": Bad(lambda x: nonleaf(x).copy_("a"), TypeError, "not str 'a'"),
        "Tensor.fill_: a value with several elements": Bad(
            lambda x: nonleaf(x).fill_(t([1.0, 2.0])),
            ValueError,
            "fill_ only supports 0-dimension value tensor",
        ),
        "Tensor.fill_: str value": Bad(
            lambda x: nonleaf(x).fill_("a"),
            TypeError,
            "fill_.*value.*number",
        ),
        "Tensor.add_: operand that broadcasts beyond the tensor": Bad(
            lambda x: nonleaf(x).add_(t(np.ones((3, 2, 3)))),
            ValueError,
            r"output with shape \[2, 3\] doesn't match the broadcast shape \[3, 2, 3\]",
        ),
        "Tensor.add_: float into an integer tensor": Bad(
            lambda x: ae.tensor([1, 2]).add_(t([0.5, 0.5])),
            TypeError,
            "result type float64 can't be cast to the desired output type int64",
        ),
        "Tensor.mul_: str operand": Bad(lambda x: nonleaf(x).mul_("a"), TypeError, "not str 'a'"),
        "Tensor.sub_: operand of another shape": Bad(
            lambda x: nonleaf(x).sub_(t(np.ones((3, 3)))),
            ValueError,
            r"the operand of shape \[3, 3\] cannot be broadcast to the shape \[2, 3\]",
        ),
        "Tensor.div_: str operand": Bad(lambda x: nonleaf(x).div_("a"), TypeError, "not str 'a'"),
        "Tensor.clamp_: neither min nor max": Bad(
            lambda x: nonleaf(x).clamp_(), ValueError, "at least one of min or max"
        ),
        "Tensor.detach_: a view": Bad(
            lambda x: x[0].detach_(), ae.AutogradError, "Can't detach views in-place"
        ),
        "Tensor.relu_: a view of a leaf": Bad(
            lambda x: x[0].relu_(), ae.AutogradError, "a view of a leaf Variable that requires grad"
        ),
        "Tensor.add: str operand": Bad(lambda x: x.add("a"), TypeError, "not str 'a'"),
        "Tensor.add: alpha": Bad(
            lambda x: x.add(x, alpha="2"), TypeError, "argument 'alpha' must be a number"
        ),
        "Tensor.sub: operand of another shape": Bad(
            lambda x: x.sub(t(np.ones((3, 3)))), ValueError, "could not be broadcast"
        ),
        "Tensor.mul: operand of another shape": Bad(
            lambda x: x.mul(t(np.ones((3, 3)))), ValueError, "could not be broadcast"
        ),
        "Tensor.div: str operand": Bad(lambda x: x.div("a"), TypeError, "not str 'a'"),
        "Tensor.pow: str exponent": Bad(lambda x: x.pow("a"), TypeError, "not str 'a'"),
        "Tensor.matmul: inner sizes differ": Bad(
            lambda x: x.matmul(t(np.ones((2, 3)))), ValueError, "cannot be multiplied"
        ),
        "Tensor.__matmul__: inner sizes differ": Bad(
            lambda x: x @ t(np.ones((2, 3))), ValueError, "cannot be multiplied"
        ),
        "Tensor.mm: inner sizes differ": Bad(
            lambda x: x.mm(t(np.ones((2, 3)))),
            ValueError,
            "mat1 and mat2 shapes cannot be multiplied",
        ),
        "Tensor.dot: 2-d operands": Bad(lambda x: x.dot(x), ValueError, "1D tensors expected"),
        "Tensor.maximum: operand of another shape": Bad(
            lambda x: x.maximum(t(np.ones((3, 3)))), ValueError, "could not be broadcast"
        ),
        "Tensor.minimum: str operand": Bad(lambda x: x.minimum("a"), TypeError, "not str 'a'"),
        "Tensor.eq: str operand": Bad(
            lambda x: x.eq("a"),
            TypeError,
            "not str 'a'",
        ),
        "Tensor.ne: operand of another shape": Bad(
            lambda x: x.ne(t(np.ones((3, 3)))), ValueError, "could not be broadcast"
        ),
        "Tensor.ge: operand of another shape": Bad(
            lambda x: x.ge(t(np.ones((3, 3)))), ValueError, "could not be broadcast"
        ),
        "Tensor.gt: operand of another shape": Bad(
            lambda x: x.gt(t(np.ones((3, 3)))), ValueError, "could not be broadcast"
        ),
        "Tensor.le: operand of another shape": Bad(
            lambda x: x.le(t(np.ones((3, 3)))), ValueError, "could not be broadcast"
        ),
        "Tensor.lt: operand of another shape": Bad(
            lambda x: x < t(np.ones((3, 3))), ValueError, "could not be broadcast"
        ),
        "Tensor.clamp: neither min nor max": Bad(
            lambda x: x.clamp(), ValueError, "at least one of min or max"
        ),
        "Tensor.bernoulli: probability above 1": Bad(
            lambda x: (x * 0 + 2).bernoulli(), RuntimeError, r"in \[0, 1\]"
        ),
        "Tensor.multinomial: 3-D weights": Bad(
            lambda x: t(np.ones((2, 2, 2))).multinomial(1), RuntimeError, "1 or 2 dim"
        ),
        "Tensor.cuda: a cpu device": Bad(lambda x: x.cuda("cpu"), ValueError, "must be cuda"),
        "Tensor.type: not a dtype": Bad(lambda x: x.type("bogus"), TypeError, "bogus"),
        "Tensor.masked_fill: float mask": Bad(
            lambda x: x.masked_fill(t(np.ones((2, 3))), 0.0),
            RuntimeError,
            "only supports boolean masks",
        ),
        "Tensor.sum: repeated dims": Bad(
            lambda x: x.sum(dim=(0, 0)), ValueError, "appears multiple times in the list of dims"
        ),
        "Tensor.sum: str dim": Bad(
            lambda x: x.sum("a"), TypeError, "argument 'dim' must be an int or a tuple of ints"
        ),
        "Tensor.mean: dim out of range": Bad(
            lambda x: x.mean(5), IndexError, "Dimension out of range"
        ),
        "Tensor.prod: dim out of range": Bad(
            lambda x: x.prod(5), IndexError, "Dimension out of range"
        ),
        "Tensor.amax: dim out of range": Bad(
            lambda x: x.amax(5), IndexError, "Dimension out of range"
        ),
        "Tensor.amin: dim out of range": Bad(
            lambda x: x.amin(5), IndexError, "Dimension out of range"
        ),
        "Tensor.max: str dim": Bad(lambda x: x.max("a"), TypeError, "dim must be an int, got str"),
        "Tensor.min: dim out of range": Bad(
            lambda x: x.min(5), IndexError, "Dimension out of range"
        ),
        "Tensor.std: dim out of range": Bad(
            lambda x: x.std(5), IndexError, "Dimension out of range"
        ),
        "Tensor.var: dim out of range": Bad(
            lambda x: x.var(5), IndexError, "Dimension out of range"
        ),
        "Tensor.norm: unknown p": Bad(
            lambda x: x.norm(p="bogus"), RuntimeError, "Order bogus not supported"
        ),
        "Tensor.softmax: dim out of range": Bad(
            lambda x: x.softmax(5), IndexError, "Dimension out of range"
        ),
        "Tensor.log_softmax: no dim": Bad(
            lambda x: x.log_softmax(), TypeError, "missing required argument 'dim'"
        ),
        "Tensor.logsumexp: no dim": Bad(
            lambda x: x.logsumexp(), TypeError, "missing required argument 'dim'"
        ),
        "Tensor.transpose: dim out of range": Bad(
            lambda x: x.transpose(0, 5), IndexError, "Dimension out of range"
        ),
        "Tensor.permute: repeated dim": Bad(
            lambda x: x.permute(0, 0), ValueError, "not a permutation"
        ),
        "Tensor.unsqueeze: dim out of range": Bad(
            lambda x: x.unsqueeze(5), IndexError, "Dimension out of range"
        ),
        "Tensor.squeeze: dim out of range": Bad(
            lambda x: x.squeeze(5), IndexError, "Dimension out of range"
        ),
        "Tensor.flatten: start after end": Bad(
            lambda x: x.flatten(1, 0), ValueError, "start_dim cannot come after end_dim"
        ),
        "Tensor.expand: fewer sizes than dims": Bad(
            lambda x: x.expand(3), ValueError, "the number of sizes provided"
        ),
        "Tensor.broadcast_to: fewer sizes than dims": Bad(
            lambda x: x.broadcast_to((3,)),
            ValueError,
            "the number of sizes provided",
        ),
        "Tensor.narrow: past the end": Bad(
            lambda x: x.narrow(0, 1, 5), RuntimeError, "exceeds dimension size"
        ),
        "Tensor.select: index out of range": Bad(
            lambda x: x.select(0, 5), IndexError, "out of range for tensor of size"
        ),
        "Tensor.chunk: zero chunks": Bad(lambda x: x.chunk(0), ValueError, "greater than 0"),
        "Tensor.split: zero size": Bad(
            lambda x: x.split(0), ValueError, "split_size can only be 0"
        ),
        "Tensor.unbind: dim out of range": Bad(
            lambda x: x.unbind(5), IndexError, "Dimension out of range"
        ),
        "Tensor.gather: float index": Bad(
            lambda x: x.gather(0, t([[0.0, 0.0, 0.0]])),
            RuntimeError,
            "Expected dtype int64 for index",
        ),
        "Tensor.index_select: float index": Bad(
            lambda x: x.index_select(0, t([0.0])), RuntimeError, "Expected dtype int64 for index"
        ),
        "Tensor.take_along_dim: float index": Bad(
            lambda x: x.take_along_dim(t([[0.0]]), 0),
            RuntimeError,
            "Expected dtype int64 for index",
        ),
        "Tensor.dim: an argument": Bad(
            lambda x: x.dim(1), TypeError, "takes 1 positional argument"
        ),
    }
)


def _bool_advice(x: ae.Tensor) -> None:
    """bool(x) fails; follow its advice (.any(), .all()), then say so with a ValueError."""
    try:
        bool(x)
    except ValueError:
        assert (x > 0).any().item() and (x > 0).all().item()
        raise ValueError("advice followed") from None


def _rows() -> list[Any]:
    return [
        pytest.param(
            row,
            id=name,
            marks=[pytest.mark.xfail(strict=True, reason=row.unclear)] if row.unclear else [],
        )
        for name, row in TABLE.items()
    ]


def _leaf() -> ae.Tensor:
    x = ae.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=F64, requires_grad=True)
    x.grad = ae.full((2, 3), 7.0, dtype=F64)
    return x


@pytest.mark.parametrize("row", _rows())
def test_bad_input_raises_a_clear_error_and_leaves_grad_untouched(row: Bad) -> None:
    x = _leaf()
    grad = x.grad
    with pytest.raises(row.exc, match=row.match):
        row.call(x)
    if row.keeps_grad:
        assert x.grad is grad, "the error replaced x.grad"
        assert x.grad.tolist() == [[7.0] * 3] * 2, "the error changed x.grad"
    assert x.detach().tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "the error changed x"


# -- the table covers every public entry point ------------------------------------------------

#: public names with no argument to get wrong, or covered under another name, with the reason
NO_BAD_INPUT: dict[str, str] = {
    "autograd": "a module: rows for ae.autograd.forward_ad.make_dual above, the rest in "
    "tests/api/test_forward_ad.py",
    "linalg": "a module: its functions are operators of the table (tests/ops/test_table.py)",
    "nn": "a module: modules, init and utils are tested in tests/nn/ (bad arguments too)",
    "optim": "a module: bad arguments of optimizers and schedules in tests/nn/test_optim.py",
    "Tensor.bool": "takes no argument (a cast)",
    "Tensor.int": "takes no argument (a cast)",
    "Tensor.long": "takes no argument (a cast)",
    "Tensor.half": "takes no argument (a cast)",
    "__version__": "a string",
    "current_engine": "takes no argument",
    "EngineStats": "a result type, made by engine.stats()",
    "sync": "a module: its entry points have rows (ae.sync.*)",
    "functional": "a module: its entry points have rows (ae.functional.*)",
    "func": "a module: bad input to its transforms (argnums, has_aux, outputs, in_dims, out_dims, "
    "sizes, shapes, randomness, functional_call's dicts) is tested in tests/func/",
    "sync.func": "the synchronous twins of ae.func: their bad input is tested in tests/func/",
    "viz": "a module: its entry points have rows (ae.viz.*)",
    "distributed": "a module: its bad input (ranks, ops, parameters, misuse) is tested in tests/test_distributed*.py",
    "testing": "a module: its entry points have rows in tests/test_testing.py (bad arguments, schedules)",
    "AccumulateGrad": "a node type, made by the engine",
    "Node": "the node base type, made by the engine",
    "BackwardCFunction": "the node type of custom Functions, made by Function.apply",
    "FunctionCtx": "the ctx type: its methods have rows under ae.Function",
    "RemovableHandle": "made by register_*; remove() takes no argument and twice is harmless",
    "AutogradError": "an exception type",
    "BackwardError": "an exception type",
    "GradcheckError": "an exception type",
    "CheckpointError": "an exception type",
    "MaxResult": "a result tuple of max(dim)",
    "MinResult": "a result tuple of min(dim)",
    "Tensor": "its methods have rows (Tensor.*)",
    "is_grad_enabled": "takes no argument",
    "is_inference_mode_enabled": "takes no argument",
    "is_anomaly_enabled": "takes no argument",
    "is_anomaly_check_nan_enabled": "takes no argument",
    "get_default_dtype": "takes no argument",
    "complex64": "a dtype",
    "complex128": "a dtype",
    "bool": "a dtype",
    "bool_": "a dtype",
    "float16": "a dtype",
    "float32": "a dtype",
    "float64": "a dtype",
    "int8": "a dtype",
    "int16": "a dtype",
    "int32": "a dtype",
    "int64": "a dtype",
    "uint8": "a dtype",
    "Tensor.abs": "no argument; a non-tensor input is ae.abs's row",
    "Tensor.clone": "no argument",
    "Tensor.cpu": "no argument",
    "Tensor.contiguous": "no argument",
    "Tensor.cos": "no argument",
    "Tensor.detach": "no argument",
    "Tensor.double": "no argument",
    "Tensor.exp": "no argument",
    "Tensor.expm1": "no argument",
    "Tensor.float": "no argument",
    "Tensor.is_floating_point": "no argument",
    "Tensor.is_inference": "no argument",
    "Tensor.log": "no argument",
    "Tensor.log1p": "no argument",
    "Tensor.neg": "no argument",
    "Tensor.numel": "no argument",
    "Tensor.sigmoid": "no argument",
    "Tensor.sign": "no argument",
    "Tensor.sin": "no argument",
    "Tensor.sqrt": "no argument",
    "Tensor.square": "no argument",
    "Tensor.tanh": "no argument",
    "Tensor.tolist": "no argument",
    "Tensor.relu": "no argument",
}


def _public_entry_points() -> list[str]:
    names = list(ae.__all__)
    names += [f"sync.{n}" for n in ae.sync.__all__ if n != "functional"]
    names += [f"sync.functional.{n}" for n in ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp")]
    names += [f"functional.{n}" for n in ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp")]
    names += [f"viz.{n}" for n in ae.viz.__all__]
    for name, member in inspect.getmembers(ae.Tensor):
        settable = isinstance(member, property) and member.fset is not None
        if name.startswith("_") or not (callable(member) or settable):
            continue  # read-only fields (shape, dtype, is_leaf, T...) take no input
        names.append(f"Tensor.{name}")
    return names


def _in_operator_table(name: str) -> bool:
    """Whether ``name`` (``ae.X`` or ``Tensor.X``) is an operator of the operator table.

    Its bad calls run in tests/ops/test_table.py: each entry's error cases
    (torch's exception type, a message naming the argument) and, for every
    entry, a string where its tensor goes.
    """
    from aengine.ops._table import TABLE as OPS

    if name.startswith("Tensor."):
        method = name.removeprefix("Tensor.")
        return any(i.method_name == method for i in OPS.values())
    return name in OPS


def _in_dual_level(fn: Any) -> Any:
    with ae.autograd.forward_ad.dual_level():
        return fn()


def _has_row(name: str) -> bool:
    prefix = name if name.startswith("Tensor.") else f"ae.{name}"
    return any(key.startswith(prefix + ":") for key in TABLE) or _in_operator_table(name)


def test_every_public_entry_point_has_rows() -> None:
    missing = [
        name
        for name in _public_entry_points()
        if not _has_row(name) and name not in NO_BAD_INPUT and f"ae.{name}" not in NO_BAD_INPUT
    ]
    assert not missing, f"public entry points without a bad-input row: {missing}"
