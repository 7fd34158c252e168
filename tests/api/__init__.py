"""Tests of the public API as users call it (backward, grad, Function, hooks, profile, viz...)."""
