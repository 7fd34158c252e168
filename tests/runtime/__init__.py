"""Tests of the runtime: drivers, the Engine, offload, threads, reentrancy, cancellation."""
