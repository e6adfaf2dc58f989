"""float64 reference for llm.c's crossentropy_forward: the loss of each position's target."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def crossentropy_forward(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """losses[b, t] = -log(probs[b, t, targets[b, t]])."""
    v = int(shape["V"])
    probs = np.asarray(inputs["probs"], dtype=np.float64).reshape(-1, v)
    targets = np.asarray(inputs["targets"]).astype(np.int64).reshape(-1)
    return {"losses": -np.log(probs[np.arange(targets.size), targets])}
