"""``ae.save`` and ``ae.load``: checkpoints in the safetensors format.

A model's state dict (names to tensors) is written as a plain safetensors
file with torch's key names, so the file torch writes with
``safetensors.torch.save_file(model.state_dict(), path)`` loads into the
matching aengine model and back.  A nested state (an optimizer's
``state_dict()``: per-parameter tensors and the param groups' settings) is
stored flat: each tensor under its dotted path, everything else as JSON in
the file's metadata, and ``ae.load`` rebuilds the nesting.
"""

from __future__ import annotations

import json
import os
from typing import Any, BinaryIO

import numpy as np

from .tensors._device import Device
from .tensors._tensor import Tensor

__all__ = ["save", "load"]

#: the metadata key of a nested state's structure
_STRUCTURE = "aengine.structure"


def _c_order(a: np.ndarray) -> np.ndarray:
    """``a`` in C order, 0-d arrays kept 0-d (numpy's ascontiguousarray makes them 1-d)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


def _flatten(obj: Any, prefix: str, tensors: dict[str, np.ndarray]) -> Any:
    """``obj`` with every tensor replaced by ``{"@t": key}`` (its key in ``tensors``)."""
    if isinstance(obj, Tensor):
        tensors[prefix] = _c_order(obj.detach().cpu().numpy())
        return {"@t": prefix}
    if isinstance(obj, np.ndarray):
        tensors[prefix] = _c_order(obj)
        return {"@t": prefix, "@np": True}
    if isinstance(obj, dict):
        return {
            "@d": [
                [k, _flatten(v, f"{prefix}.{k}" if prefix else str(k), tensors)]
                for k, v in obj.items()
            ]
        }
    if isinstance(obj, (list, tuple)):
        items = [_flatten(v, f"{prefix}.{i}", tensors) for i, v in enumerate(obj)]
        return {"@l": items, "@tuple": isinstance(obj, tuple)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(
        f"ae.save stores tensors, numpy arrays, numbers, strings and dicts/lists of them; "
        f"{prefix or 'the object'} is a {type(obj).__name__}"
    )


def _rebuild(node: Any, tensors: dict[str, Any], device: Device) -> Any:
    if isinstance(node, dict):
        if "@t" in node:
            arr = tensors[node["@t"]]
            if node.get("@np"):
                return arr
            return Tensor._make(device.backend.from_numpy(arr), False, device)
        if "@d" in node:
            return {k: _rebuild(v, tensors, device) for k, v in node["@d"]}
        if "@l" in node:
            items = [_rebuild(v, tensors, device) for v in node["@l"]]
            return tuple(items) if node.get("@tuple") else items
    return node


def save(
    obj: dict[str, Any],
    f: str | os.PathLike[str] | BinaryIO,
    metadata: dict[str, str] | None = None,
) -> None:
    """Write ``obj`` (a state dict) to ``f`` (a path or a binary file) as safetensors.

    A flat dict of tensors is a plain safetensors file (torch reads it with
    ``safetensors.torch.load_file``); nested states keep their structure in
    the metadata.

    Example::

        >>> import aengine as ae, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> ae.save({"w": ae.ones(2)}, path)
        >>> ae.load(path)["w"].tolist()
        [1.0, 1.0]
    """
    # lazily: only programs that save load it
    from safetensors.numpy import save as st_save

    if not isinstance(obj, dict):
        raise TypeError(f"ae.save takes a dict (a state_dict), got {type(obj).__name__}")
    tensors: dict[str, np.ndarray] = {}
    flat = all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())
    meta = dict(metadata or {})
    if flat:
        for k, v in obj.items():
            tensors[k] = _c_order(v.detach().cpu().numpy())
    else:
        meta[_STRUCTURE] = json.dumps(_flatten(obj, "", tensors))
    data = st_save(tensors, metadata=meta or None)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            out.write(data)
    else:
        f.write(data)


def load(
    f: str | os.PathLike[str] | BinaryIO, map_location: Any = None, *, device: Any = None
) -> dict[str, Any]:
    """Read a checkpoint written by ``ae.save`` or by safetensors (torch's or numpy's).

    Tensors come back on ``device`` (or ``map_location``; default cpu).  A
    file that is not a safetensors checkpoint raises ValueError naming it.
    """
    # lazily, as in save
    from safetensors.numpy import load as st_load

    dev = Device(device or map_location or "cpu")
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<stream>")
    try:
        if isinstance(f, (str, os.PathLike)):
            with open(f, "rb") as src:
                raw = src.read()
        else:
            raw = f.read()
        tensors = st_load(raw)
        meta = _metadata(raw)
    except FileNotFoundError:
        raise
    except Exception as exc:  # safetensors' own errors: not a checkpoint, a dtype numpy lacks
        raise ValueError(f"{name} is not a safetensors checkpoint aengine can read: {exc}") from exc
    if _STRUCTURE in meta:
        out: dict[str, Any] = _rebuild(json.loads(meta[_STRUCTURE]), tensors, dev)
        return out
    return {k: Tensor._make(dev.backend.from_numpy(v), False, dev) for k, v in tensors.items()}


def _metadata(raw: bytes) -> dict[str, str]:
    """The metadata of a safetensors file: its header is 8 bytes of length, then JSON."""
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    meta: dict[str, str] = header.get("__metadata__") or {}
    return meta
