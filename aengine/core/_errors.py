"""The exceptions aengine raises.

Every error about the state of the autograd engine subclasses
:class:`AutogradError`, itself a :class:`RuntimeError`, so code written for
PyTorch (``except RuntimeError``) keeps working.  Bad arguments raise
``TypeError`` / ``ValueError`` as usual.
"""

from __future__ import annotations

__all__ = ["AutogradError", "BackwardError", "GradcheckError", "ERR_BACKWARD_TWICE"]


class AutogradError(RuntimeError):
    """Root of aengine's own engine errors (a ``RuntimeError``).

    Example::

        >>> import aengine as ae
        >>> issubclass(ae.AutogradError, RuntimeError)
        True
    """


class BackwardError(AutogradError):
    """An exception raised while a node's backward ran.

    The message names the node; the original exception is chained as
    ``__cause__`` and kept as :attr:`original`.
    """

    def __init__(self, message: str, node_name: str, original: BaseException) -> None:
        super().__init__(message)
        self.node_name = node_name
        self.original = original


class GradcheckError(AutogradError):
    """``gradcheck`` / ``gradgradcheck`` found analytical and numerical gradients differ.

    The message names the output and the input and shows both Jacobians.

    Example::

        >>> import aengine as ae
        >>> issubclass(ae.GradcheckError, ae.AutogradError)
        True
    """


ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the "
    "graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)
