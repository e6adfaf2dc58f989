"""float64 reference for llm.c's layernorm_forward: per row of C, mean, 1/std (eps 1e-5) and the
scaled, shifted output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def layernorm(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5
) -> dict[str, np.ndarray]:
    """Rows of ``x`` [N, C] normalised: {"out", "mean", "rstd"} (the biased variance, as llm.c)."""
    mean = x.mean(axis=1)
    var = ((x - mean[:, None]) ** 2).mean(axis=1)
    rstd = 1.0 / np.sqrt(var + eps)
    out = (x - mean[:, None]) * rstd[:, None] * weight[None, :] + bias[None, :]
    return {"out": out, "mean": mean, "rstd": rstd}


def layernorm_forward(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point: inp [N, C], weight [C], bias [C]."""
    c = int(shape["C"])
    x = np.asarray(inputs["inp"], dtype=np.float64).reshape(-1, c)
    w = np.asarray(inputs["weight"], dtype=np.float64).reshape(c)
    b = np.asarray(inputs["bias"], dtype=np.float64).reshape(c)
    return layernorm(x, w, b)
