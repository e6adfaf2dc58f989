"""float64 reference for llm.c's encoder_forward: token embedding plus position embedding."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def encoder_forward(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """out[b, t, :] = wte[inp[b, t], :] + wpe[t, :]."""
    b, t, c = int(shape["B"]), int(shape["T"]), int(shape["C"])
    ids = np.asarray(inputs["inp"]).astype(np.int64).reshape(b, t)
    wte = np.asarray(inputs["wte"], dtype=np.float64).reshape(-1, c)
    wpe = np.asarray(inputs["wpe"], dtype=np.float64).reshape(-1, c)
    return {"out": wte[ids] + wpe[:t][None, :, :]}
