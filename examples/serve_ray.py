"""The explanation service scaled out: Ray Serve replicas behind one HTTP address.

    python examples/serve_ray.py 8000 cnn.safetensors               # 2 replicas, 127.0.0.1:8000
    python examples/serve_ray.py 8000 cnn.safetensors --replicas 4
    python examples/serve_ray.py 8000 cnn.safetensors --autoscale   # 1 to 4 replicas by load

The app is examples/explain_service.py, unchanged: a FastAPI app whose
lifespan opens one ``ae.Engine`` and loads the model from a safetensors
checkpoint (training and saving it first when the file is missing), and
whose ``/explain`` route runs each request's forward and backward in that
Engine's compute threads.  Ray Serve runs one copy of the app in each
replica (an actor, i.e. a process of its own, on any machine of the
cluster) and runs the app's lifespan there: every replica opens its own
Engine on its own event loop and loads the checkpoint once.  Serve's HTTP
proxy spreads the requests over the replicas and starts a new replica when
one dies.  A client that disconnects has its request cancelled on its
replica, and the Engine stops that request's backward at its next time
slice.

Without Ray, the same app scales over processes with uvicorn's workers (one
Engine per worker, the operating system spreading the connections)::

    EXPLAIN_CHECKPOINT=cnn.safetensors uvicorn --app-dir examples explain_service:app \\
        --host 127.0.0.1 --port 8000 --workers 2

What a second process gives, and what a replica costs in memory, is in
docs/services.md ("Scaling out").  On a cluster, the checkpoint path must be
readable on every machine (a shared file system), or the file must be
shipped with the job.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import sys
import time
from typing import Any

from fastapi import FastAPI
from ray import cloudpickle, serve

# explain_service.py lies beside this file; Ray ships its functions to the
# replicas by value (below), so the replicas need not find it on their path
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import explain_service

cloudpickle.register_pickle_by_value(explain_service)

#: Serve's default for an autoscaled deployment, bounded for a small machine:
#: a replica more when each has more than 8 requests in flight for a while.
AUTOSCALING = {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 8}


def deployment(
    checkpoint: str | os.PathLike[str],
    dtype: str = "float32",
    *,
    num_replicas: int = 2,
    autoscaling: dict[str, Any] | None = None,
    max_ongoing_requests: int = 32,
) -> Any:
    """The Serve application: the explanation app, one copy per replica.

    Each replica takes one CPU of the cluster (its Engine's compute threads
    share that process's cores).  ``autoscaling`` replaces ``num_replicas``
    with Serve's autoscaling config (e.g. ``AUTOSCALING``).  A replica takes
    up to ``max_ongoing_requests`` at once; the proxy queues the rest.
    """
    path = str(pathlib.Path(checkpoint).resolve())

    def build() -> FastAPI:  # runs on each replica, which then runs the app's lifespan
        return explain_service.create_app(path, dtype)

    scaling: dict[str, Any] = (
        {"autoscaling_config": autoscaling} if autoscaling else {"num_replicas": num_replicas}
    )
    app = serve.deployment(
        serve.ingress(build)(),
        name="explain",
        max_ongoing_requests=max_ongoing_requests,
        ray_actor_options={"num_cpus": 1},
        **scaling,
    )
    return app.bind()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int, nargs="?", default=int(os.environ.get("PORT", "8000")))
    parser.add_argument(
        "checkpoint",
        nargs="?",
        default=os.environ.get("EXPLAIN_CHECKPOINT", explain_service.DEFAULT_CHECKPOINT),
    )
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--autoscale", action="store_true", help="1 to 4 replicas by load")
    parser.add_argument("--dtype", default=os.environ.get("EXPLAIN_DTYPE", "float32"))
    args = parser.parse_args(argv)

    import ray  # here: importing this module (the tests do) starts no cluster

    path = pathlib.Path(args.checkpoint)
    if not path.exists():  # trained once here, not by every replica at the same time
        explain_service.load_or_train(path, args.dtype)
    ray.init(_node_ip_address="127.0.0.1", include_dashboard=False)
    # Ctrl-C stops it even where it was started with SIGINT ignored (a
    # shell's background job, a supervisor), where Python would not raise
    # KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": args.port})
        serve.run(
            deployment(
                path,
                args.dtype,
                num_replicas=args.replicas,
                autoscaling=AUTOSCALING if args.autoscale else None,
            ),
            name="explain",
            route_prefix="/",
        )
        print(f"serving on http://127.0.0.1:{args.port} (Ctrl-C stops)", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:  # the replicas, the proxy and the cluster this script started
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
