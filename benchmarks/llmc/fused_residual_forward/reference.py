"""float64 reference for llm.c's fused_residual_forward: residual = inp1 + inp2, then the
layernorm of each row of the residual (mean, 1/std with eps 1e-5, scaled and shifted).

The kernels store the residual in bf16 and normalise what they stored, so the reference rounds
the residual to bf16 (nearest even) before the layernorm too; the mean is of the unrounded sums,
as in llm.c's kernels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> the nearest bf16 value (ties to even), returned as float64."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def fused_residual_forward(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """{"residual", "normed", "mean", "rstd"} for inp1, inp2 [N, C], weight and bias [C]."""
    c = int(shape["C"])
    res = np.asarray(inputs["inp1"], dtype=np.float64).reshape(-1, c) + np.asarray(
        inputs["inp2"], dtype=np.float64
    ).reshape(-1, c)
    w = np.asarray(inputs["weight"], dtype=np.float64).reshape(c)
    b = np.asarray(inputs["bias"], dtype=np.float64).reshape(c)
    mean = res.mean(axis=1)
    stored = round_bf16(res)
    rstd = 1.0 / np.sqrt(((stored - mean[:, None]) ** 2).mean(axis=1) + 1e-5)
    normed = (stored - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
    return {"residual": res, "normed": normed, "mean": mean, "rstd": rstd}
