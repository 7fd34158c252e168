"""Tests of the examples, run against real servers."""
