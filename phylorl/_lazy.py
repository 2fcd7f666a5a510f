"""Package namespaces that import their submodules on first use (PEP 562).

A package's ``__init__`` that imports every submodule makes any import below it pay for all of them: the
configuration dataclasses a service's ``--help`` reads pulled in torch, torch-geometric, numba and scipy (five
seconds for ``phylorl train --help``). With :func:`exports` a package names what it re-exports and where, and
each name is imported when first read.
"""

from __future__ import annotations

import importlib


def exports(package: str, where: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package`` re-exporting ``name`` from submodule ``where[name]``."""

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{where[name]}")
        value = getattr(module, name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__():
        return sorted(set(vars(importlib.import_module(package))) | set(where))

    return __getattr__, __dir__
