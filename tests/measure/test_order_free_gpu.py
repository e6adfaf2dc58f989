"""The order-free comparison on the device (the GPU worker passes cupy): the same verdicts as
numpy's, for slots handed out in another order and for a wrong multiset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ktx.measure.verify import compare_output

from .test_order_free import gating, spec_of

pytestmark = pytest.mark.gpu


def test_multisets_per_group_on_cupy_arrays(tmp_path: Path) -> None:
    cp = pytest.importorskip("cupy")
    spec = spec_of(tmp_path)
    offsets = next(a for a in spec.args if a.name == "offsets")
    tol = spec.tolerance_for(offsets.dtype)
    first, second = gating(1), gating(2)
    dev = {k: cp.asarray(v) for k, v in first.items()}
    other = {k: cp.asarray(v) for k, v in second.items()}
    assert compare_output(offsets, other, dev, tol, True, spec, cp).ok
    shifted = {**dev, "offsets": dev["offsets"] + 1}
    assert not compare_output(offsets, shifted, dev, tol, True, spec, cp).ok
    floats = {k: v.astype(np.float64) for k, v in first.items()}  # a Python reference's values
    assert compare_output(
        offsets, other, {k: cp.asarray(v) for k, v in floats.items()}, tol, False, spec, cp
    ).ok
