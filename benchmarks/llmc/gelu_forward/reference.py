"""float64 reference for llm.c's gelu_forward: the tanh approximation of GELU, element by element."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def gelu(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the form llm.c's kernels compute."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_forward(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point: {"out": gelu(inp)}."""
    return {"out": gelu(inputs["inp"])}
