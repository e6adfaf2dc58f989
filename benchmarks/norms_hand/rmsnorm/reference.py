"""The suite's rmsnorm reference (kernels/rmsnorm/reference.py), for the hand variant beside it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "ktx_hand_rmsnorm_reference", Path(__file__).resolve().parents[3] / "kernels" / "rmsnorm" / "reference.py"
)
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)
rmsnorm = _MODULE.rmsnorm
