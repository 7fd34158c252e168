"""Batching rules: how each op of the table moves the batch dimension under vmap.

The kinds and the helpers they share are in _rule_kinds.py, the rules of
their own in _custom_rules.py; here they are registered for dispatch.

# NOTE [Batching rule kinds]
# The ``batch`` column of an ``OpInfo`` names the rule of the op, as a kind
# and its parameters (``"kind:params"``); the kinds are interpreted here,
# in the transforms' layer, so the operator table (which may not import it)
# only says how the batch dimension moves:
#
# - ``pointwise``: elementwise with broadcasting; a batched operand of lower
#   rank than the others gets singleton dims after its batch dim, so the
#   samples broadcast as one sample's operands do.
# - ``dim:p1,p2``: the named parameters are dims of the first argument (an
#   int, a sequence, or None for "all dims"); they move up by one.  Other
#   tensor arguments must not be batched.  ``newdim:p`` is the same for a dim
#   counted in the result, one more than the input has (unsqueeze).
# - ``leading:k``: the op works on the last ``k`` dims of its first argument
#   and takes any number of leading ones (``-1``: it broadcasts over every
#   leading dim, as linear's input or layer_norm's): the samples are folded
#   into the leading dims and unfolded after.  Other tensor arguments must not
#   be batched (ops with a rule of their own handle those).
# - ``loss``: an elementwise loss: computed with ``reduction='none'`` by the
#   pointwise rule, then reduced per sample.
# - ``custom``: a rule of its own, in ``CUSTOM`` (_custom_rules.py: matmul,
#   linear, conv2d, reshape, indexing, cross entropy...).
#
# An op without a ``batch`` entry raises VmapError naming it.
"""

from __future__ import annotations

from ._batched import KINDS, RULES
from ._custom_rules import CUSTOM
from ._rule_kinds import _dims, _leading, _loss, _pointwise

__all__ = ["CUSTOM"]

KINDS.update(
    pointwise=_pointwise,
    dim=_dims,
    newdim=lambda info, params: _dims(info, params, insert=True),
    leading=_leading,
    loss=_loss,
    custom=lambda info, params: CUSTOM[info.name if info is not None else params],
)


def register_rules() -> None:
    """Add custom rules to RULES for names that are not table entries (indexing, view)."""
    RULES["__getitem__"] = CUSTOM["__getitem__"]
    RULES["view"] = CUSTOM["view"]
    RULES["reshape"] = CUSTOM["reshape"]


register_rules()
