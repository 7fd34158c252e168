"""ae.distributed.ray_groups on a local Ray cluster: the cases of
ray_distributed_cases.py, in a process of their own (see NOTE [Ray's driver
in a process of its own] in tests/ray_child.py)."""

from __future__ import annotations

from tests.ray_child import run_cases


def test_ray_groups_cases_pass_in_a_driver_process_of_their_own() -> None:
    run_cases("tests/distributed/ray_distributed_cases.py")
