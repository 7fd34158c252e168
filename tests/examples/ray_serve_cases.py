"""The explanation app as 2 Ray Serve replicas on a local cluster (127.0.0.1).

Run by test_scale_out.py in a pytest process of its own, as these cases start
Ray's driver in the test process (see NOTE [Ray's driver in a process of its
own] in tests/ray_child.py).  The fixtures and checks are test_scale_out.py's.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.examples import test_scale_out as base
from tests.examples.test_examples import free_port, load
from tests.examples.test_scale_out import (
    Client,
    answers_from_every_process,
    bad_input_is_422,
    load_with_a_kill,
)

# test_scale_out.py's fixtures, found by pytest under these names
_no_hang = base._no_hang
mod = base.mod
checkpoint = base.checkpoint
workload = base.workload


@pytest.fixture(scope="module")
def serve_app(checkpoint: pathlib.Path) -> Iterator[str]:
    """2 replicas of the app (float64) on a local cluster, Serve's proxy on 127.0.0.1."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'aengine[ray]')")
    serve = pytest.importorskip("ray.serve", reason="Ray Serve is not installed (aengine[ray])")
    serve_ray = load("serve_ray")
    port = free_port()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(serve_ray.deployment(checkpoint, "float64"), name="explain", route_prefix="/")
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


def _replicas() -> dict[str, Any]:
    import ray  # only where the Ray fixture ran

    return {
        a["name"]: ray.get_actor(a["name"], namespace=a["namespace"])
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("SERVE_REPLICA::")
    }


def _running_replicas() -> int:
    from ray import serve  # only where the Ray fixture ran

    status = serve.status().applications["explain"].deployments["explain"]
    return int(status.replica_states.get("RUNNING", 0))


def test_serve_replicas_answer_as_torch_and_bad_input_is_422(serve_app: str, workload: Any) -> None:
    client = Client(serve_app)
    try:
        assert len(answers_from_every_process(client, workload, 2)) == 2
        bad_input_is_422(client)
        assert client.get("/health").json() == {"ok": True}
    finally:
        client.close()
    assert client.retries == 0


def test_serve_replica_killed_under_load_loses_no_request(serve_app: str, workload: Any) -> None:
    import ray  # the fixture skipped the test where Ray is missing

    client = Client(serve_app)
    before = _replicas()
    assert len(before) == 2

    def kill() -> str:
        name = sorted(before)[0]
        ray.kill(before[name], no_restart=True)
        return name

    def replaced(name: str) -> bool:
        now = _replicas()
        return name not in now and len(now) == 2 and _running_replicas() == 2

    try:
        load_with_a_kill(client, workload, kill, replaced)
    finally:
        client.close()
