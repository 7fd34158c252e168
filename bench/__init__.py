"""Benchmarks of aengine side by side with PyTorch, HIPS autograd, MyGrad and numpy.

``python -m bench`` (``make bench``) runs every workload; ``python -m bench
--quick`` (``make bench-quick``) runs tiny sizes once, as a smoke test.
Results go to ``bench/results/latest.json`` and ``latest.md``; see
``docs/performance.md`` for the method and the latest numbers.

Layout:

- ``harness``: timing, interleaving of systems, statistics, gradient checks.
- ``systems``: one adapter per system for the graph workloads.
- ``workloads``: chain, wide and mlp (graph definitions and the numpy floor).
- ``service``: loop lag, concurrency, fixed cost and memory.
- ``http_service``: a real HTTP service under load (``_http_apps``, ``_http_torch``,
  ``_http_numpy``: its servers; ``_http_load``: the load generators and the
  /health prober).
- ``_progress``: progress bars on stderr (tqdm; off without a terminal or with --quiet).
- ``report``: the markdown tables and the targets.
- ``profile``: ``python -m bench.profile`` profiles aengine's backward.
"""
