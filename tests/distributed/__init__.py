"""Tests of ae.distributed: process groups, GradSync, rpc (in-process and Ray)."""
