"""ae.nn.functional normalisations, linear layers, embedding, dropout, attention, distances."""

from __future__ import annotations
