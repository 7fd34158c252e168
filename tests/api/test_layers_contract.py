"""Every module of aengine sits in a layer of the import contract (pyproject.toml).

import-linter checks only the modules a layer names: a new top-level module
left out of the list would import anything unchecked.  This test fails when
one is added without a layer.
"""

from __future__ import annotations

import tomllib

from tests.paths import ROOT


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers" and "aengine.core" in contract["layers"]:
            return list(contract["layers"])
    raise AssertionError("no layers contract over aengine in pyproject.toml")


def test_every_top_level_module_of_aengine_is_in_a_layer() -> None:
    named = {m.strip() for layer in _layers() for m in layer.replace("|", ":").split(":")}
    package = ROOT / "aengine"
    modules = {f"aengine.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {
        f"aengine.{p.name}"
        for p in package.iterdir()
        if p.is_dir() and (p / "__init__.py").exists() and not p.is_symlink()
    }
    missing = sorted(modules - named)
    assert not missing, f"add {missing} to a layer of the layers contract in pyproject.toml"
    stale = sorted(m for m in named if m not in modules)
    assert not stale, f"the layers contract names modules that do not exist: {stale}"
