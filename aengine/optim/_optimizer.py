"""``ae.optim.Optimizer``: param groups, per-parameter state and its state dict, as torch's.

# NOTE [Optimizer steps]
# A step updates each parameter's array in place and bumps its version (as
# torch's in-place update does, so a graph that saved the old value notices).
# The arithmetic is torch's single-tensor ("for-loop") implementation,
# operation by operation, on the backend's arrays: a parameter after N steps
# equals torch's from the same start to rounding (float64: 1e-10 relative).
# The state of a parameter is a dict of Tensors, as torch's ("step" is a
# 0-d float32 tensor where torch keeps it so), so state_dict() has torch's
# layout and keys.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core import enable_grad, no_grad
from ..nn._module import zero_grads
from ..tensors._tensor import Tensor
from ..tensors._views import commit_inplace

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


#: a default that each param group must give itself (torch's ``required``)
required: Any = _Required()


class Optimizer:
    """The base class of optimizers: param groups, state, ``step`` and ``zero_grad``.

    Subclasses implement ``_step_group(group)`` (NOTE [Optimizer steps]).

    Example::

        >>> import aengine as ae
        >>> w = ae.nn.Parameter(ae.tensor([1.0, 2.0]))
        >>> opt = ae.optim.SGD([w], lr=0.5)
        >>> w.grad = ae.tensor([1.0, 1.0])
        >>> opt.step()
        >>> w.tolist()
        [0.5, 1.5]
    """

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {type(params).__name__}"
            )
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self) -> str:
        out = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            out.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    out.append(f"    {key}: {group[key]}")
        out.append(")")
        return "\n".join(out)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own settings (defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params is "
                    f"{type(p).__name__}"
                )
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization "
                    f"parameter {key}"
                )
            group.setdefault(key, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter (to None by default, as torch)."""
        zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; ``closure`` recomputes the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _step_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    # -- state dict ----------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [...]}``, parameters as indices (torch's)."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index and s}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict (this optimizer's or torch's layout), checking it fits first."""
        state_dict = copy.deepcopy(_plain(state_dict))
        groups = state_dict.get("param_groups")
        if groups is None or "state" not in state_dict:
            raise ValueError("not an optimizer state dict: it needs 'state' and 'param_groups'")
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't match the size "
                    "of optimizer's group"
                )
        by_index = {
            i: p
            for theirs, mine in zip(groups, self.param_groups)
            for i, p in zip(theirs["params"], mine["params"])
        }
        new_state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for key, value in state_dict["state"].items():
            p = by_index.get(int(key))
            if p is None:
                continue
            new_state[p] = {k: _state_value(k, v, p) for k, v in value.items()}
        for mine, theirs in zip(self.param_groups, groups):
            mine.update({k: v for k, v in theirs.items() if k != "params"})
        self.state = new_state


def _plain(sd: Any) -> Any:
    """A state dict with torch tensors (if any) as numpy arrays, so it deep-copies."""
    if isinstance(sd, dict):
        return {k: _plain(v) for k, v in sd.items()}
    if isinstance(sd, list):
        return [_plain(v) for v in sd]
    if hasattr(sd, "detach") and not isinstance(sd, Tensor):  # a torch tensor
        return sd.detach().cpu().numpy()
    return sd


def _state_value(key: str, value: Any, p: Tensor) -> Any:
    """A state entry as a Tensor on ``p``'s device; floating ones cast to ``p``'s dtype (not step)."""
    if isinstance(value, Tensor):
        arr = value.detach().cpu().numpy()
    elif isinstance(value, np.ndarray) or np.isscalar(value):
        arr = np.asarray(value)
    else:
        return value
    if key != "step" and arr.dtype.kind == "f":
        arr = arr.astype(p.dtype)
    t = Tensor._make(p.device.backend.from_numpy(np.array(arr)), False, p.device)
    return t


def bump(p: Tensor) -> None:
    """Mark ``p`` as modified in place (its version counter moves)."""
    commit_inplace(p, None)
