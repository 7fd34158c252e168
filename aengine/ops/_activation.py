"""ae.nn.functional activations (gelu, silu, elu, softplus, glu...)."""

from __future__ import annotations
