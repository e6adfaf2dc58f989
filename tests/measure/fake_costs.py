"""A stand-in GPU worker that accounts for its seconds as the GPU worker does (``costs``): the
original kernel's request spends ``ORIGINAL_PYTHON_S`` on its Python reference and
``ORIGINAL_CHECK_S`` on the rest of its check, every request ``TIME_S`` timing; otherwise
:mod:`tests.measure.fake_gpu` answers."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

from ktx.measure.gpu import checks_the_original
from ktx.measure.types import Candidate


def _fake_gpu() -> Any:
    """The sibling stand-in, by its path (the worker loads this file by path, not as a package)."""
    spec = importlib.util.spec_from_file_location(
        "ktx_test_fake_gpu", Path(__file__).with_name("fake_gpu.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fake_gpu = _fake_gpu()

ORIGINAL_PYTHON_S = 0.2
ORIGINAL_CHECK_S = 0.3
TIME_S = 0.05


def handle(op: str, payload: Any) -> Any:
    result = fake_gpu.handle(op, payload)
    if op != "measure":
        return result
    original = checks_the_original(Candidate.from_dict(payload["candidate"]), payload.get("reference"))
    python = ORIGINAL_PYTHON_S if original else 0.0
    check = python + (ORIGINAL_CHECK_S if original else 0.0)
    time.sleep(check + TIME_S)
    return {**result, "costs": {"warmup_s": 0.0, "python_s": python, "verify_s": check, "time_s": TIME_S}}
