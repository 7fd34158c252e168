"""Tests of the benchmark harness and its reports."""
