"""``ae.nn.Module`` and ``ae.nn.Parameter``, with torch.nn.Module's behaviour.

# NOTE [Parameters are Tensors]
# torch's Parameter is a Tensor subclass.  aengine's ops test
# ``x.__class__ is Tensor`` on their hot path (a subclass would take the slow,
# converting path and lose its history), so ``Parameter(data)`` returns a
# plain Tensor that requires grad and carries a mark (``_is_param``, a cold
# field in the instance dict); ``isinstance(t, Parameter)`` reads the mark.
# A module registers as parameters the tensors so marked, as torch registers
# Parameter instances.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from ..core import RemovableHandle, no_grad
from ..tensors._creation import tensor as _tensor
from ..tensors._tensor import Tensor
from ..tensors._views import commit_inplace

__all__ = ["Module", "Parameter", "Buffer", "IncompatibleKeys", "zero_grads"]


class _ParameterMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.__dict__.get("_is_param", False)


class Parameter(metaclass=_ParameterMeta):
    """A tensor that a Module registers as a parameter (requires grad by default).

    ``Parameter(data)`` returns a Tensor (NOTE [Parameters are Tensors]);
    ``isinstance(t, ae.nn.Parameter)`` tells parameters apart.

    Example::

        >>> import aengine as ae
        >>> p = ae.nn.Parameter(ae.zeros(2))
        >>> p.requires_grad, isinstance(p, ae.nn.Parameter), isinstance(ae.zeros(2), ae.nn.Parameter)
        (True, True, False)
    """

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> Any:
        if data is None:
            data = _tensor(np.empty(0, dtype=np.float32))
        elif not isinstance(data, Tensor):
            data = _tensor(data)
        t = data.detach()
        t.requires_grad_(requires_grad)
        t.__dict__["_is_param"] = True
        return t


class Buffer(metaclass=_ParameterMeta):
    """A tensor a Module registers as a buffer when assigned (``persistent``: in state_dict).

    Example::

        >>> import aengine as ae
        >>> m = ae.nn.Module()
        >>> m.steps = ae.nn.Buffer(ae.zeros(1))
        >>> [n for n, _ in m.named_buffers()]
        ['steps']
    """

    def __new__(cls, data: Any = None, *, persistent: bool = True) -> Any:
        t = data.detach() if isinstance(data, Tensor) else _tensor(data)
        t.__dict__["_is_buffer"] = persistent
        return t


def _is_buffer_mark(value: Any) -> bool | None:
    if isinstance(value, Tensor):
        mark: bool | None = value.__dict__.pop("_is_buffer", None)
        return mark
    return None


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: the keys it lacked and those it did not use."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (
            f"IncompatibleKeys(missing_keys={self.missing_keys}, "
            f"unexpected_keys={self.unexpected_keys})"
        )


class Module:
    """The base class of layers and models, as torch.nn.Module.

    Assigning a Parameter, a Module or (with ``register_buffer``) a tensor
    as an attribute registers it; ``parameters()``, ``state_dict()``,
    ``train()``/``eval()``, ``to()`` and hooks walk the tree of submodules.

    Example::

        >>> import aengine as ae
        >>> class Scale(ae.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = ae.nn.Parameter(ae.ones(2))
        ...     def forward(self, x):
        ...         return x * self.w
        >>> m = Scale()
        >>> m(ae.tensor([1.0, 2.0])).tolist(), list(m.state_dict())
        ([1.0, 2.0], ['w'])
    """

    training: bool
    _parameters: OrderedDict[str, Any]
    _buffers: OrderedDict[str, Any]
    _modules: OrderedDict[str, Any]
    _non_persistent_buffers_set: set[str]
    _forward_hooks: OrderedDict[int, Any]
    _forward_hooks_with_kwargs: set[int]
    _forward_pre_hooks: OrderedDict[int, Any]
    _forward_pre_hooks_with_kwargs: set[int]

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks_with_kwargs", set())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks_with_kwargs", set())

    forward: Callable[..., Any]

    def _forward_unimplemented(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    forward = _forward_unimplemented

    # -- registration --------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(ae.nn.Parameter or None expected)"
                )
            params[name] = None
            return
        if isinstance(value, Module):
            if "_modules" not in self.__dict__:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name)
            self._modules[name] = value
            return
        modules = self.__dict__.get("_modules")
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(ae.nn.Module or None expected)"
                )
            modules[name] = None
            return
        mark = _is_buffer_mark(value)
        if mark is not None:
            self._forget(name)
            self.register_buffer(name, value, persistent=mark)
            return
        buffers = self.__dict__.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(ae.Tensor or None expected)"
                )
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _forget(self, name: str) -> None:
        self.__dict__.pop(name, None)
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            store = d.get(key)
            if store is not None and name in store:
                return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for key in ("_parameters", "_buffers", "_modules"):
            store = self.__dict__[key]
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        keys = set(super().__dir__())
        keys.update(self._parameters, self._buffers, self._modules)
        return sorted(keys)

    def _check_name(self, name: Any, what: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string. Got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f'{what} name can\'t be empty string "" or contain ".", got: {name}')
        if hasattr(self, name) and name not in getattr(self, f"_{what}s", {}):
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Any) -> None:
        """Add a parameter (a Parameter, or None) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(ae.nn.Parameter or None required)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state that is not a parameter (``persistent``: saved in state_dict)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(ae.Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at a dotted path ('' is the module itself)."""
        mod: Module = self
        for item in target.split(".") if target else ():
            if item not in mod._modules or mod._modules[item] is None:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target: str) -> Tensor:
        """The parameter at a dotted path."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        p: Tensor = mod._parameters[name]
        return p

    # -- walking the tree ----------------------------------------------------------

    def named_modules(
        self, memo: set[int] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """(name, module) for this module and every submodule, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """This module and every submodule."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) of the direct children."""
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        """The direct children."""
        for _, m in self.named_children():
            yield m

    def _named_members(
        self, key: str, prefix: str, recurse: bool, remove_duplicate: bool
    ) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
        if not recurse:
            mods = iter([(prefix, self)])
        for mprefix, m in mods:
            for name, v in getattr(m, key).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, parameter) of this module and (``recurse``) its submodules."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        """The parameters (each once), in registration order."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) of this module and (``recurse``) its submodules."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes, conversions, gradients ---------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout, batch norm statistics) here and below; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        """``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` of every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the parameters' gradients (to None by default, as torch)."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule (children first) and on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace every parameter's and buffer's data by ``fn``'s (identity of the tensors kept)."""
        with no_grad():
            for m in self.modules():
                for store in (m._parameters, m._buffers):
                    for t in store.values():
                        if t is None:
                            continue
                        new = fn(t)
                        if new.device != t.device:
                            t._device = new._device
                        t.data = new.data
                        commit_inplace(t, None)
                        if t.grad is not None:
                            t.grad = fn(t.grad)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Move and/or cast the parameters and buffers: ``to(device)``, ``to(dtype)``, both.

        Only floating tensors change dtype, as torch's.
        """
        device, dtype = None, None
        for a in (*args, *kwargs.values()):
            if isinstance(a, str) or type(a).__name__ == "Device":
                device = a
            elif a is not None:
                dtype = np.dtype(a)
        if dtype is not None and dtype.kind not in "fc":
            raise TypeError(
                f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                f"dtype={dtype}"
            )

        def convert(t: Tensor) -> Tensor:
            want = dtype if (dtype is not None and t.dtype.kind in "fc") else None
            return t.to(device=device, dtype=want)

        return self._apply(convert)

    def float(self) -> Module:
        """Cast floating parameters and buffers to float32."""
        return self.to(np.float32)

    def double(self) -> Module:
        """Cast floating parameters and buffers to float64."""
        return self.to(np.float64)

    def half(self) -> Module:
        """Cast floating parameters and buffers to float16."""
        return self.to(np.float16)

    def cpu(self) -> Module:
        """Move parameters and buffers to the cpu."""
        return self.to("cpu")

    # -- state dict ----------------------------------------------------------------

    def state_dict(
        self, *, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name (detached unless ``keep_vars``)."""
        out: OrderedDict[str, Tensor] = OrderedDict() if destination is None else destination
        for mprefix, m in self.named_modules(prefix=prefix.rstrip(".")):
            dot = mprefix + ("." if mprefix else "")
            for name, p in m._parameters.items():
                if p is not None:
                    out[dot + name] = p if keep_vars else p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent_buffers_set:
                    out[dot + name] = b if keep_vars else b.detach()
        return out

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict`` (Tensors or numpy arrays).

        Every key, shape and value is checked before anything is copied: on
        an error (missing or unexpected keys with ``strict``, a shape
        mismatch, something not an array) the module is left as it was.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict).__name__}."
            )
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors: list[str] = []
        updates: list[tuple[Tensor, Any]] = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            arr = _host_array(value)
            if arr is None:
                errors.append(
                    f'While copying the parameter named "{key}", expected an ae.Tensor or a '
                    f"numpy array from checkpoint but received {type(value).__name__}"
                )
                continue
            if tuple(arr.shape) != tuple(target.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {tuple(arr.shape)} "
                    f"from checkpoint, the shape in current model is {tuple(target.shape)}."
                )
                continue
            updates.append((target, arr))
        if strict:
            if unexpected:
                errors.insert(
                    0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected)
                )
            if missing:
                errors.insert(
                    0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing)
                )
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        with no_grad():
            for target, arr in updates:
                backend = target.device.backend
                if assign:
                    target.data = backend.from_numpy(np.array(arr, copy=True))
                    commit_inplace(target, None)  # (a new array: its version moves)
                else:
                    target.copy_(np.asarray(arr))
        return IncompatibleKeys(missing, unexpected)

    # -- calling and hooks ---------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for key, hook in list(self._forward_pre_hooks.items()):
            if key in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        out = self.forward(*args, **kwargs)
        for key, hook in list(self._forward_hooks.items()):
            if key in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, out)
            else:
                res = hook(self, args, out)
            if res is not None:
                out = res
        return out

    def _add_hook(self, store: OrderedDict[int, Any], hook: Any, prepend: bool) -> RemovableHandle:
        handle = RemovableHandle(store)
        store[handle.id] = hook
        if prepend:
            store.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(
        self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """``hook(module, args)`` before each forward; it may return new args."""
        handle = self._add_hook(self._forward_pre_hooks, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(
        self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """``hook(module, args, output)`` after each forward; it may return a new output."""
        handle = self._add_hook(self._forward_hooks, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        return handle

    # -- repr ----------------------------------------------------------------------

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (layers override it)."""
        return ""

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            text = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {text}")
        head = type(self).__name__ + "("
        if not lines:
            return head + ")"
        if len(lines) == 1 and not self._modules:
            return head + lines[0] + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def zero_grads(params: Iterable[Tensor], set_to_none: bool) -> None:
    """Reset the gradients of ``params``: to None, or zeros kept in place (as torch)."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            g = p.grad.detach()
            g.data[...] = 0
            p.grad = g


def _host_array(value: Any) -> Any:
    """A checkpoint's value as a numpy array (None when it is not array-like)."""
    if isinstance(value, Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__array__") or hasattr(value, "numpy"):
        try:
            return np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        except Exception:
            return None
    return None
