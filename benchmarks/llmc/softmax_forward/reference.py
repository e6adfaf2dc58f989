"""float64 reference for llm.c's softmax_forward: a softmax over each row of C."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def softmax_forward(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """out[n, :] = exp(inp[n, :] - max) / sum(exp(inp[n, :] - max))."""
    c = int(shape["C"])
    x = np.asarray(inputs["inp"], dtype=np.float64).reshape(-1, c)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": e / e.sum(axis=1, keepdims=True)}
