"""A server for ``bench.scale``: an app factory of bench/_http_apps.py as Ray Serve replicas.

    python -m bench._http_ray bench._http_apps:aengine_example PORT REPLICAS

Starts a local Ray cluster (its processes under this one), Serve's HTTP
proxy on 127.0.0.1:PORT and REPLICAS replicas of the app (each runs the
app's lifespan: its own Engine), then waits until it is terminated.  The
replicas get this process's environment (the BLAS thread settings) and
find the ``bench`` package through PYTHONPATH.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: the settings the replicas' processes inherit (bench/threads.py sets them)
PASSED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BENCH_HTTP_THREADS")


def _build(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)()


def main(argv: list[str]) -> None:
    target, port, replicas = argv[0], int(argv[1]), int(argv[2])
    import ray  # here: the module is imported by the tests without Ray
    from ray import serve

    env = {k: os.environ[k] for k in PASSED if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    ray.init(
        num_cpus=max(2, replicas),
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})

        def build() -> Any:  # on each replica
            return _build(target)

        app = serve.deployment(
            serve.ingress(build)(),
            name="bench",
            num_replicas=replicas,
            max_ongoing_requests=64,
            ray_actor_options={"num_cpus": 1},
        )
        serve.run(app.bind(), name="bench", route_prefix="/")
        stop.wait()
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
