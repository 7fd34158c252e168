"""The generator definitions behind ``ae.functional`` (functional.py makes the public functions).

``_common``: the helpers (checks, preparation, the engine call, forward-mode
runs); ``_vjp_jvp``, ``_jacobian`` (with ``hessian``), ``_hvp`` (with
``vhp``): one generator per public function, which yields from the engine's
``_grad`` for every backward it needs.
"""
