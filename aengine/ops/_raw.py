"""The raw ops namespace (``RawOps``, in the backends: NOTE [The F namespace]).

The array backends sit below everything in aengine and import none of it,
so the check that ``RawOps`` implements the ``GradOps`` Protocol, which the
tensors layer defines, is made here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # the same source as aengine.adapters._raw: mypy finds adapters/ as the
    # package ``adapters`` (the installed name maps to it through an import
    # hook, which mypy does not follow)
    from adapters._raw import RawOps, sum_to_axes

    from ..tensors._tensor_ops import GradOps
else:
    from aengine.adapters._raw import RawOps, sum_to_axes

__all__ = ["RawOps", "sum_to_axes"]


if TYPE_CHECKING:

    def _implements_grad_ops(raw: RawOps) -> GradOps:
        return raw  # mypy checks here that RawOps implements the Protocol
