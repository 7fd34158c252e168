"""Tests of tensors: views, in-place ops, devices, dtypes."""
