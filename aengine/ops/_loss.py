"""ae.nn.functional losses (cross_entropy, nll_loss, mse_loss...)."""

from __future__ import annotations
