"""``ae.optim``: optimizers and learning-rate schedules with torch's names and numbers.

Example::

    >>> import aengine as ae
    >>> w = ae.nn.Parameter(ae.tensor([2.0]))
    >>> opt = ae.optim.AdamW([w], lr=0.1)
    >>> loss = (w * w).sum()
    >>> _ = loss.backward()
    >>> opt.step(); opt.zero_grad()
    >>> w.item() < 2.0, w.grad is None
    (True, True)
"""

from . import lr_scheduler
from ._algorithms import SGD, Adagrad, Adam, AdamW, NAdam, RAdam, RMSprop
from ._optimizer import Optimizer

__all__ = [
    "Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "NAdam", "RAdam", "lr_scheduler",
]  # fmt: skip
