"""``ae.nn``: neural-network building blocks under torch.nn's names.

``ae.nn.functional`` holds the functional forms (layers, activations, losses)
from the operator table::

    >>> import aengine as ae
    >>> ae.nn.functional.relu(ae.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from . import functional

__all__ = ["functional"]
