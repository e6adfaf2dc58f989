"""A stand-in GPU worker whose warm-up takes ``KTX_TEST_WARM_S`` seconds and is logged, one line per
warm-up, to the file ``KTX_TEST_WARM_LOG`` names (so a test can count them across processes)."""

from __future__ import annotations

import os
import time
from typing import Any

from ktx.measure.occupancy import DeviceLimits


def handle(op: str, payload: Any) -> Any:
    if op == "device":
        return DeviceLimits().to_dict()
    if op == "warmup":
        time.sleep(float(os.environ.get("KTX_TEST_WARM_S", "0")))
        with open(os.environ["KTX_TEST_WARM_LOG"], "a", encoding="utf-8") as log:
            log.write(f"warmup {os.getpid()}\n")
        return {}
    raise ValueError(f"unexpected request {op!r}")
