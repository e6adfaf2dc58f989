"""ktx: compiler-style source transformation and autotuning of CUDA kernels.

The names below are imported on first use, so that ``import ktx`` (and every ``ktx`` command)
stays fast; see ``docs/api.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "KtxError",
    "Pass",
    "apply",
    "init",
    "load_spec",
    "optimize",
    "register",
    "tune",
]

_WHERE = {
    "KtxError": "ktx.ir.errors",
    "Pass": "ktx.passbase",
    "apply": "ktx.api",
    "init": "ktx.api",
    "load_spec": "ktx.specload",
    "optimize": "ktx.api",
    "register": "ktx.registry",
    "tune": "ktx.api",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ktx' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
