"""Tests of the operators: values, gradients and errors against torch."""
