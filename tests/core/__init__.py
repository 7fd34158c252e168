"""Tests of the core: graph tasks, dependency counting, plans, modes (no event loop)."""
