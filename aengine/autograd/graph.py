"""``ae.autograd.graph``: as ``torch.autograd.graph``.

Saved-tensor hooks (``saved_tensors_hooks``, ``save_on_cpu``,
``disable_saved_tensors_hooks``; NOTE [Saved-tensor hooks] in
core/_saved_hooks.py), gradient edges (``GradientEdge``,
``get_gradient_edge``), ``register_multi_grad_hook``,
``increment_version`` and ``allow_mutation_on_saved_tensors`` (NOTE
[Mutation of saved tensors] in _mutation.py).
"""

from __future__ import annotations

from typing import Any

from .._hooks import register_multi_grad_hook
from ..core._edge import GradientEdge
from ..core._graph import gradient_edge, own_vc
from ..core._saved_hooks import disable_saved_tensors_hooks, saved_tensors_hooks
from ..tensors import Tensor
from ._mutation import allow_mutation_on_saved_tensors

__all__ = [
    "GradientEdge",
    "allow_mutation_on_saved_tensors",
    "disable_saved_tensors_hooks",
    "get_gradient_edge",
    "increment_version",
    "register_multi_grad_hook",
    "save_on_cpu",
    "saved_tensors_hooks",
]


class save_on_cpu(saved_tensors_hooks):
    """Context manager: tensors saved for backward are kept on the CPU, as torch's.

    Each saved tensor on another device is copied to the CPU when it is
    saved and back to its device when the backward needs it (CPU tensors
    are kept as they are); device memory is then freed as the forward goes.
    ``pin_memory`` is accepted for torch's signature (page-locked copies
    are the CuPy allocator's business here).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> with ae.autograd.graph.save_on_cpu():
        ...     y = (x * x).sum()
        >>> _ = y.backward()
        >>> x.grad.tolist()
        [2.0, 4.0]
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack(t: Tensor) -> tuple[Any, Tensor]:
            if t.device.type == "cpu":
                return t.device, t
            return t.device, t.to("cpu")

        def unpack(packed: tuple[Any, Tensor]) -> Tensor:
            device, t = packed
            return t if t.device == device else t.to(device)

        super().__init__(pack, unpack)
        self.pin_memory = pin_memory
        self.device_type = device_type


def increment_version(tensor: Any) -> None:
    """Bump ``tensor``'s version counter, as an in-place change would (as torch's).

    For code that changes a tensor's data in place behind autograd's back:
    a backward that saved it then raises the in-place error instead of
    using the changed values.  ``tensor`` may be a Tensor or a list/tuple
    of them.

    Example::

        >>> import aengine as ae
        >>> x = ae.ones(2)
        >>> ae.autograd.graph.increment_version(x)
        >>> x._version
        1
    """
    tensors = tensor if isinstance(tensor, (list, tuple)) else (tensor,)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(
                f"increment_version expects a Tensor or a list of Tensors, got {type(t).__name__}"
            )
        own_vc(t)[0] += 1


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """The edge ``tensor``'s gradient flows along: its grad_fn (or accumulator) and input number.

    As torch's: ``ae.grad`` takes it as an input (the gradient arriving
    there) or as an output (with ``grad_outputs``).  A tensor that does not
    require grad has none (RuntimeError).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> ae.autograd.graph.get_gradient_edge(x * 3.0).node.name()
        'MulBackward0'
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"get_gradient_edge expects a Tensor, got {type(tensor).__name__}")
    if not tensor.requires_grad:
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that does not require "
            "gradients"
        )
    node, nr = gradient_edge(tensor)
    return GradientEdge(node, nr)
