"""The function transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap.

# NOTE [Transforms defined once, run by either driver]
# A transform's work is a generator that yields each GraphTask it needs run
# (NOTE [One definition, two drivers] in aengine/_autograd.py).  A
# transformed function is a ``Transformed`` holding that generator function;
# called, the async flavour (``ae.func.grad(f)(x)``) returns an awaitable and
# the sync flavour (``ae.sync.func.grad(f)(x)``) runs at once.  Transforms
# compose through their generators, not their calls: ``vmap(grad(f))`` runs
# grad's generator inside vmap's, so the outermost transform's flavour
# drives every backward of the composition (``ae.func.vmap(ae.func.grad(f))``
# is awaited once).  The user's function is plain (sync) code.
#
# Levels: ``grad`` and its siblings are levels of differentiation without
# level ids: each runs the function on fresh leaves (or, inside another
# reverse transform, on differentiable aliases) and, when an outer transform
# will differentiate the result, records its backward (create_graph).
#
# NOTE [Forward mode through one function]
# ``jvp``, ``jacfwd`` and ``hessian`` reach forward-mode AD only through
# ``_jvp_impl``; it uses the double-backward trick today (as
# ae.functional.jvp: ``J v = d<J^T u, v>/du`` with ``u`` a zero cotangent
# that requires grad), one backward for ``J^T u`` and one per tangent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Sequence
from typing import Any

from .._autograd import _async_runner, _grad, _no_loop_here, _run_sync, _warn_if_in_loop
from .._awaitables import _Call, _new_call
from ..core import GraphTask
from ..core._modes import enable_grad
from ..ops import stack
from ..runtime import loop_here
from ..tensors import Tensor
from ..tensors._creation import zeros_like
from ._batched import (
    CREATE_GRAPH,
    GRAD_DEPTH,
    VmapError,
    active_levels,
    levels_of,
    to_levels,
    wrap_levels,
)
from ._pytree import tree_flatten, tree_unflatten

__all__ = ["Transformed", "make"]

Gen = Generator[GraphTask, None, Any]


# -- running a transform's generator ------------------------------------------------------------
class Transformed:
    """A function made by a transform: call it (async flavour: ``await`` the call).

    Example::

        >>> import aengine as ae
        >>> g = ae.sync.func.grad(lambda x: (x ** 2).sum())
        >>> g(ae.tensor([1.0, 2.0])).tolist()
        [2.0, 4.0]
    """

    __slots__ = ("_gen", "_sync", "_public", "__wrapped__", "__name__", "__qualname__", "__dict__")

    def __init__(self, gen: Callable[..., Gen], sync: bool, public: str, wrapped: Any) -> None:
        self._gen = gen
        self._sync = sync
        self._public = public
        self.__wrapped__ = wrapped
        self.__name__ = self.__qualname__ = public
        self.__doc__ = getattr(wrapped, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._sync:
            _warn_if_in_loop(self._public)
            return _run_sync(self._gen(*args, **kwargs))
        if loop_here() is None:
            _no_loop_here(self._public)
        call = _new_call(_Call)
        call._coro = _runner(self._public)(self._gen(*args, **kwargs))
        return call

    def __repr__(self) -> str:
        flavour = "ae.sync." if self._sync else "ae."
        return f"<{flavour}{self._public} of {self.__wrapped__!r}>"


@functools.cache
def _runner(public: str) -> Any:
    return _async_runner(public.rpartition(".")[2], public)


def call(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Gen:
    """Call the user's function, or run a transformed one's generator inside ours."""
    if isinstance(func, Transformed):
        return (yield from func._gen(*args, **kwargs))
    out = func(*args, **kwargs)
    if isinstance(out, _Call) or hasattr(out, "__await__"):
        if hasattr(out, "close"):
            out.close()
        raise TypeError(
            "ae.func transforms take plain (sync) functions; the function returned an "
            "awaitable (an async def, or an ae.func transform called inside it): compose "
            "transforms directly, e.g. ae.func.vmap(ae.func.grad(f))"
        )
    return out


def make(
    name: str, gen: Callable[..., Callable[..., Gen]], doc: str
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The async and sync flavours of a transform ``gen(func, ...) -> generator function``."""
    public = f"func.{name}"

    def flavour(sync: bool) -> Callable[..., Any]:
        def transform(func: Any, *args: Any, **kwargs: Any) -> Transformed:
            return Transformed(gen(func, *args, **kwargs), sync, public, func)

        transform.__name__ = transform.__qualname__ = name
        transform.__doc__ = doc
        transform.__module__ = "aengine.sync.func" if sync else "aengine.func"
        return transform

    return flavour(False), flavour(True)


# -- argnums and inputs -------------------------------------------------------------------------
def _check_argnums(argnums: Any, n: int, where: str) -> tuple[int, ...] | int:
    if isinstance(argnums, bool) or not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"{where}: argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if isinstance(argnums, tuple):
        if not argnums:
            raise RuntimeError(f"{where}: argnums must be non-empty")
        for a in argnums:
            _check_argnums(a, n, where)
        if len(set(a % n for a in argnums)) != len(argnums):
            raise RuntimeError(f"{where}: argnums must be unique, got {argnums}")
        return argnums
    if not -n <= argnums < n:
        raise RuntimeError(f"{where}: Got argnums={argnums}, but only {n} positional inputs")
    return argnums


def _select(args: tuple[Any, ...], argnums: tuple[int, ...] | int) -> Any:
    if isinstance(argnums, int):
        return args[argnums]
    return tuple(args[a] for a in argnums)


def _replace(args: tuple[Any, ...], argnums: tuple[int, ...] | int, new: Any) -> tuple[Any, ...]:
    out = list(args)
    if isinstance(argnums, int):
        out[argnums] = new
    else:
        for a, v in zip(argnums, new, strict=True):
            out[a] = v
    return tuple(out)


class _Inputs:
    """The differentiated inputs of one reverse transform: their physical leaves and logical views."""

    def __init__(self, diff: Any, where: str) -> None:
        self.levels = active_levels()
        leaves, self.spec = tree_flatten(diff)
        for x in leaves:
            if not isinstance(x, Tensor):
                raise RuntimeError(
                    f"{where}: Expected f(*args) to be called with Tensors at the differentiated "
                    f"positions (argnums), got {type(x).__name__}"
                )
            if x.dtype.kind not in "fc":
                raise RuntimeError(
                    f"{where}: only Tensors of floating point dtype can require gradients, "
                    f"got {x.dtype}"
                )
        # an outer transform (or plain autograd) differentiates this one's results
        self.create_graph = GRAD_DEPTH.get() > 0 or any(x.requires_grad for x in leaves)
        self.cores: list[Tensor] = []
        logical = []
        for x in leaves:
            core = to_levels(x, self.levels)
            if self.create_graph and core.requires_grad:
                core = core.view_as(core)  # a differentiable alias
            else:
                core = core.detach().requires_grad_()
            self.cores.append(core)
            logical.append(wrap_levels(core, self.levels, same=not levels_of(x)))
        self.logical = tree_unflatten(logical, self.spec)

    def wrap(self, cores: Sequence[Any]) -> Any:
        """Physical results (one per input leaf) as the inputs' logical structure."""
        return tree_unflatten([wrap_levels(c, self.levels) for c in cores], self.spec)

    def core_of(self, out: Tensor) -> Tensor:
        return to_levels(out, self.levels)


class _Depth:
    """Inside a reverse transform: GRAD_DEPTH + 1, grad mode on, CREATE_GRAPH as it says."""

    def __init__(self, create_graph: bool) -> None:
        self.create_graph = create_graph

    def __enter__(self) -> None:
        self._tokens = (GRAD_DEPTH.set(GRAD_DEPTH.get() + 1), CREATE_GRAPH.set(self.create_graph))
        self._grad = enable_grad()
        self._grad.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._grad.__exit__(*exc)
        GRAD_DEPTH.reset(self._tokens[0])
        CREATE_GRAPH.reset(self._tokens[1])


def _finish(x: Any, create_graph: bool) -> Any:
    """A result as the caller gets it: detached unless an outer transform differentiates it."""
    if create_graph or not isinstance(x, Tensor):
        return x
    return x.detach()


def _backward(
    outs: Sequence[Tensor],
    cores: Sequence[Tensor],
    grad_outputs: Sequence[Tensor],
    create_graph: bool,
) -> Gen:
    """``sum_k <grad_outputs[k], d outs[k] / d cores>``; zeros where an input is unused."""
    pairs = [(o, g) for o, g in zip(outs, grad_outputs, strict=True) if o.requires_grad]
    if not pairs:
        return [zeros_like(c) for c in cores]
    grads = yield from _grad(
        [o for o, _ in pairs],
        list(cores),
        [g for _, g in pairs],
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
    )
    return [zeros_like(c) if g is None else g for g, c in zip(grads, cores, strict=True)]


def _ones(core: Tensor) -> Tensor:
    xp = core._device.backend.xp
    return Tensor._make(xp.ones(core.shape, dtype=core.dtype), False, core._device)


# -- grad, grad_and_value --------------------------------------------------------------------------
def _grad_and_value_gen(
    func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False, *, _value: bool = True
) -> Callable[..., Gen]:
    where = "grad_and_value(f)(*args)"

    def gen(*args: Any, **kwargs: Any) -> Gen:
        nums = _check_argnums(argnums, len(args), where)
        ins = _Inputs(_select(args, nums), where)
        with _Depth(ins.create_graph):
            out = yield from call(func, _replace(args, nums, ins.logical), kwargs)
            out, aux = _split_aux(out, has_aux, where)
            if not isinstance(out, Tensor):
                raise RuntimeError(
                    f"{where}: Expected f(*args) to return a Tensor, got {type(out)}"
                )
            if out.ndim != 0:
                raise RuntimeError(
                    f"{where}: Expected f(*args) to return a scalar Tensor, got tensor with "
                    f"{out.ndim} dims. Maybe you wanted to use the vjp or jacrev APIs instead?"
                )
            core = ins.core_of(out)
            grads = yield from _backward([core], ins.cores, [_ones(core)], ins.create_graph)
        g = ins.wrap([_finish(x, ins.create_graph) for x in grads])
        if not _value:
            return (g, _tree_finish(aux, ins.create_graph)) if has_aux else g
        value = _finish(out, ins.create_graph)
        if has_aux:
            return g, (value, _tree_finish(aux, ins.create_graph))
        return g, value

    return gen


def _split_aux(out: Any, has_aux: bool, where: str) -> tuple[Any, Any]:
    """``f``'s output and its aux (None without ``has_aux``): ``f`` returns ``(output, aux)``."""
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(
            f"{where}: output of function f should be a tuple: (output, aux) if has_aux is True"
        )
    return out[0], out[1]


def _tree_finish(tree: Any, create_graph: bool) -> Any:
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([_finish(x, create_graph) for x in leaves], spec)


def _grad_gen(
    func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False
) -> Callable[..., Gen]:
    return _grad_and_value_gen(func, argnums, has_aux, _value=False)


# -- vjp ---------------------------------------------------------------------------------------------
def _vjp_gen(
    func: Callable[..., Any], *primals: Any, has_aux: bool = False, _sync: bool = False
) -> Gen:
    where = "vjp(f, *primals)"
    ins = _Inputs(primals, where)
    with _Depth(ins.create_graph):
        out = yield from call(func, ins.logical, {})
    out, aux = _split_aux(out, has_aux, where)
    out_leaves, out_spec = tree_flatten(out)
    for o in out_leaves:
        if not isinstance(o, Tensor):
            raise RuntimeError(
                f"{where}: Expected f to be a function that has non-empty output of Tensors, "
                f"got {type(o)}"
            )
    out_cores = [ins.core_of(o) for o in out_leaves]
    levels = ins.levels
    create_graph = ins.create_graph

    def vjp_fn_gen(
        cotangents: Any, *, retain_graph: bool = True, create_graph: bool = create_graph
    ) -> Gen:
        ct_leaves, _ = tree_flatten(cotangents)
        if len(ct_leaves) != len(out_cores):
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure of "
                f"outputs to the function: {len(ct_leaves)} cotangents for {len(out_cores)} outputs"
            )
        cts = []
        for ct, o in zip(ct_leaves, out_leaves, strict=True):
            if tuple(ct.shape) != tuple(o.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[0] has a shape of {tuple(ct.shape)} and "
                    f"output[0] has a shape of {tuple(o.shape)}"
                )
            extra = [lvl for lvl in levels_of(ct) if lvl not in levels]
            if extra:
                raise VmapError(
                    "vjp_fn was given a cotangent batched by a vmap that started after the vjp "
                    "call: call vjp inside the vmapped function, e.g. vmap(lambda x, ct: "
                    "vjp(f, x)[1](ct))"
                )
            cts.append(to_levels(ct, levels))
        with _Depth(create_graph):
            grads = yield from _backward(out_cores, ins.cores, cts, create_graph)
        return tuple(ins.wrap([_finish(g, create_graph) for g in grads]))

    vjp_fn = Transformed(vjp_fn_gen, _sync, "func.vjp_fn", func)
    result = tree_unflatten([_finish(o, create_graph) for o in out_leaves], out_spec)
    if has_aux:
        return result, vjp_fn, _tree_finish(aux, create_graph)
    return result, vjp_fn


# -- forward mode (NOTE [Forward mode through one function]) --------------------------------------
class _Jvps:
    """What ``_jvp_impl`` gives: the outputs and, per tangent set, J t (physical, per output leaf)."""

    def __init__(self, ins: _Inputs, out_leaves: list[Any], out_spec: Any, aux: Any) -> None:
        self.ins = ins
        self.out_leaves = out_leaves
        self.out_spec = out_spec
        self.aux = aux
        self.out_cores: list[Tensor] = []
        self.jv_cores: list[list[Tensor]] = []

    def outputs(self) -> Any:
        cg = self.ins.create_graph
        return tree_unflatten([_finish(o, cg) for o in self.out_leaves], self.out_spec)

    def jvp(self, k: int) -> Any:
        cg = self.ins.create_graph
        cores = self.jv_cores[k]
        return tree_unflatten(
            [wrap_levels(_finish(c, cg), self.ins.levels) for c in cores], self.out_spec
        )


def _jvp_impl(
    func: Any,
    primals: tuple[Any, ...],
    tangent_sets: Sequence[Sequence[Tensor]],
    has_aux: bool,
    where: str,
) -> Gen:
    """Run ``func(*primals)``; give its outputs and ``J t`` for each tangent set (a ``_Jvps``).

    ``primals`` is a tuple of pytrees; each tangent set a flat list with one
    tangent per primal leaf (tree_flatten order).  The one place forward-mode
    AD is reached (NOTE [Forward mode through one function]).
    """
    ins = _Inputs(primals, where)
    with _Depth(True):
        out = yield from call(func, ins.logical, {})
        out, aux = _split_aux(out, has_aux, where)
        out_leaves, out_spec = tree_flatten(out)
        for o in out_leaves:
            if not isinstance(o, Tensor):
                raise RuntimeError(
                    f"{where}: Expected f(*args) to return only tensors, got unsupported type "
                    f"{type(o)}"
                )
        res = _Jvps(ins, out_leaves, out_spec, _tree_finish(aux, ins.create_graph))
        res.out_cores = [ins.core_of(o) for o in out_leaves]
        us = [zeros_like(c).requires_grad_() for c in res.out_cores]
        # J^T u, recorded: linear in u
        jtu = yield from _backward(res.out_cores, ins.cores, us, True)
    for tangents in tangent_sets:
        tcores = [to_levels(t, ins.levels) for t in tangents]
        with _Depth(ins.create_graph):
            jv = yield from _backward(jtu, us, tcores, ins.create_graph)
        res.jv_cores.append(jv)
    return res


def _jvp_gen(
    func: Callable[..., Any],
    primals: Any,
    tangents: Any,
    *,
    strict: bool = False,
    has_aux: bool = False,
) -> Gen:
    where = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError(
            f"{where}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals)."
        )
    if not isinstance(tangents, tuple):
        raise RuntimeError(f"{where}: Expected tangents to be a tuple.")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(
            f"{where}: Expected primals and tangents to have the same python structure."
        )
    for p, t in zip(p_leaves, t_leaves, strict=True):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                f"{where}: Expected primals and tangents to have the same shape, got "
                f"{tuple(p.shape)} and {tuple(t.shape)}"
            )
    res = yield from _jvp_impl(func, primals, [t_leaves], has_aux, where)
    if has_aux:
        return res.outputs(), res.jvp(0), res.aux
    return res.outputs(), res.jvp(0)


# -- jacobians ----------------------------------------------------------------------------------------
def _jacrev_gen(
    func: Callable[..., Any],
    argnums: Any = 0,
    *,
    has_aux: bool = False,
    chunk_size: int | None = None,
) -> Callable[..., Gen]:
    where = "jacrev(f, argnums)(*args)"
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    def gen(*args: Any, **kwargs: Any) -> Gen:
        nums = _check_argnums(argnums, len(args), where)
        ins = _Inputs(_select(args, nums), where)
        nl = len(ins.levels)
        with _Depth(ins.create_graph):
            out = yield from call(func, _replace(args, nums, ins.logical), kwargs)
            out, aux = _split_aux(out, has_aux, where)
            out_leaves, out_spec = tree_flatten(out)
            per_out = []
            for o in out_leaves:
                if not isinstance(o, Tensor):
                    raise RuntimeError(f"{where}: Expected f to return tensors, got {type(o)}")
                core = ins.core_of(o)
                rows: list[list[Tensor]] = [[] for _ in ins.cores]
                for j in range(o.numel()):
                    onehot = _one_hot(core, nl, j)
                    g = yield from _backward([core], ins.cores, [onehot], ins.create_graph)
                    for k, gk in enumerate(g):
                        rows[k].append(gk)
                jacs = [
                    _assemble(rows[k], c, tuple(o.shape), nl, ins) for k, c in enumerate(ins.cores)
                ]
                per_out.append(tree_unflatten(jacs, ins.spec))
        result = tree_unflatten(per_out, out_spec)
        if has_aux:
            return result, _tree_finish(aux, ins.create_graph)
        return result

    return gen


def _assemble(
    cols: list[Tensor],
    like: Tensor,
    out_shape: tuple[int, ...],
    nl: int,
    ins: _Inputs,
    at: int | None = None,
) -> Any:
    """Stack per-element derivatives (physical) into a Jacobian block, wrapped at the levels.

    ``at`` None: rows over the output's elements (jacrev): (*lead, *out, *in);
    else columns over the input's elements (jacfwd): (*lead, *out, *in).
    """
    lead = tuple(like.shape[:nl])
    if at is None:
        logical_in = tuple(like.shape[nl:])
        if cols:
            j = stack(cols, nl).reshape(*lead, *out_shape, *logical_in)
        else:
            j = zeros_like(like).reshape(*lead, *out_shape, *logical_in)
    else:
        j = stack(cols, -1).reshape(*lead, *out_shape, *like.shape[nl:])
    return wrap_levels(_finish(j, ins.create_graph), ins.levels)


def _one_hot(core: Tensor, nl: int, j: int) -> Tensor:
    """Ones at a sample's element ``j`` in every sample (the cotangent of one Jacobian row)."""
    xp = core._device.backend.xp
    lead = 1
    for s in core.shape[:nl]:
        lead *= s
    e = xp.zeros((lead, core.numel() // lead if lead else 0), dtype=core.dtype)
    e[:, j] = 1
    return Tensor._make(e.reshape(core.shape), False, core._device)


def _jacfwd_gen(
    func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False, *, randomness: str = "error"
) -> Callable[..., Gen]:
    where = "jacfwd(f, argnums)(*args)"
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(
            "Only allowed values for randomness are 'error', 'different', or 'same'. "
            f"Got {randomness}"
        )

    def gen(*args: Any, **kwargs: Any) -> Gen:
        nums = _check_argnums(argnums, len(args), where)
        diff = _select(args, nums)
        primals = (diff,) if isinstance(nums, int) else tuple(diff)
        leaves, spec = tree_flatten(diff)
        sets = []
        for i, x in enumerate(leaves):
            for j in range(x.numel()):
                sets.append([_basis(y, j if k == i else None) for k, y in enumerate(leaves)])

        def f(*d: Any) -> Gen:
            new = d[0] if isinstance(nums, int) else d
            return (yield from call(func, _replace(args, nums, new), kwargs))

        inner = Transformed(f, True, "func.jacfwd", func)
        res = yield from _jvp_impl(inner, primals, sets, has_aux, where)
        nl = len(res.ins.levels)
        per_out = []
        for oi, o in enumerate(res.out_leaves):
            jacs = []
            pos = 0
            for x, c in zip(leaves, res.ins.cores, strict=True):
                n = x.numel()
                cols = [res.jv_cores[pos + j][oi] for j in range(n)]
                pos += n
                jacs.append(_assemble(cols, c, tuple(o.shape), nl, res.ins, at=-1))
            per_out.append(tree_unflatten(jacs, spec))
        result = tree_unflatten(per_out, res.out_spec)
        return (result, res.aux) if has_aux else result

    return gen


def _basis(x: Tensor, j: int | None) -> Tensor:
    """A one-hot tangent of a sample's shape (zeros for ``j`` None)."""
    shape = tuple(x.shape)
    xp = x._device.backend.xp
    e = xp.zeros(max(x.numel(), 1) if shape else 1, dtype=x.dtype)
    if j is not None:
        e[j] = 1
    return Tensor._make(e.reshape(shape), False, x._device)


def _hessian_gen(func: Callable[..., Any], argnums: Any = 0) -> Callable[..., Gen]:
    inner = Transformed(_jacrev_gen(func, argnums), True, "func.jacrev", func)
    return _jacfwd_gen(inner, argnums)
