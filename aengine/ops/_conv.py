"""ae.nn.functional convolutions, pooling, padding, interpolation, unfold and fold."""

from __future__ import annotations
