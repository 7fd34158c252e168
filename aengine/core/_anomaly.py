"""What anomaly mode does: forward tracebacks on nodes and NaN checks in backward.

The mode itself (``detect_anomaly``) lives in _modes.py with the grad modes.
While it is on, every node created records the forward stack (and, for nodes created during
a create_graph backward, the node whose backward created it: its parent), and
the engine checks each node's outputs for NaN.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from typing import Any

from ._errors import AutogradError
from ._graph import to_raw
from ._modes import is_anomaly_check_nan_enabled

__all__ = ["record_forward", "check_nan", "report_error"]


class _AnomalyInfo:
    """What anomaly mode keeps on a node: its forward stack and its parent's info.

    # NOTE [Anomaly parents]
    # A node created while another node's backward runs (create_graph) has
    # that node as parent; the error report lists the parent's forward trace
    # too (and its parent's...).  PyTorch keeps the parent node itself alive
    # from the child's metadata; aengine keeps only the parent's name and
    # its _AnomalyInfo (strings), so the traces survive the parent graph
    # being dropped and no node or tensor is ever kept alive by anomaly mode.
    """

    __slots__ = ("parent", "parent_name", "stack")

    def __init__(self, stack: str, parent_name: str | None, parent: _AnomalyInfo | None) -> None:
        self.stack = stack
        self.parent_name = parent_name
        self.parent = parent


def record_forward(node: Any, parent: Any, skip: int = 2) -> None:
    """Called for each new node while anomaly mode is on.

    Records the forward stack (without the innermost ``skip`` frames: this
    function and aengine's own) and, for a node created while a backward
    runs a node (a create_graph or reentrant backward), that node
    (``parent``, from ``running_node()``): its name and info (see NOTE
    [Anomaly parents]).
    """
    stack = "".join(traceback.format_stack()[:-skip])
    if parent is not None:
        node._anomaly = _AnomalyInfo(stack, parent.name(), parent._anomaly)
    else:
        node._anomaly = _AnomalyInfo(stack, None, None)


def _messages(node: Any) -> list[str]:
    """The warnings anomaly mode gives for an error in ``node`` (as PyTorch's print_stack)."""
    info = node._anomaly
    if info is None:
        return [
            f"Error detected in {node.name()}. No forward pass information available. "
            "Enable detect anomaly during forward pass for more information."
        ]
    msgs = [
        f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
        + info.stack
    ]
    depth = 0
    while info.parent_name is not None and info.parent is not None and depth < 1000:
        depth += 1
        msgs.append(
            f"\n\nPrevious calculation was induced by {info.parent_name}. Traceback of "
            "forward call that induced the previous calculation:\n" + info.parent.stack
        )
        info = info.parent
    return msgs


def report_error(node: Any) -> None:
    """Warn with the failing node's forward trace and its parents' (as PyTorch's anomaly mode).

    When warnings are turned into errors the text goes to stderr instead, so
    the original error still propagates.
    """
    for msg in _messages(node):
        try:
            warnings.warn(msg, UserWarning, stacklevel=2)
        except Exception:
            print(msg, file=sys.stderr)


def check_nan(node: Any, outs: Any) -> None:
    """Raise if one of ``outs`` (raw arrays or tensors) holds NaN (anomaly mode with check_nan)."""
    if not is_anomaly_check_nan_enabled():
        return
    for i, g in enumerate(outs):
        if g is None:
            continue
        arr = to_raw(g)
        # NaN is the one value unequal to itself: no array module needed
        if arr.dtype.kind in "fc" and bool((arr != arr).any()):
            raise AutogradError(
                f"Function '{node.name()}' returned nan values in its {i}th output."
            )
