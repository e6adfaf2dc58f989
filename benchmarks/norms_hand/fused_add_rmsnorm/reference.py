"""The suite's fused_add_rmsnorm reference (kernels/fused_add_rmsnorm/reference.py), for the hand variant beside it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "ktx_hand_fused_add_rmsnorm_reference", Path(__file__).resolve().parents[3] / "kernels" / "fused_add_rmsnorm" / "reference.py"
)
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)
fused_add_rmsnorm = _MODULE.fused_add_rmsnorm
