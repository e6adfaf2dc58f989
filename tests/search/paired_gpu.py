"""A stand-in GPU worker handler for the paired final check (measures nothing, runs on a CPU).

Every candidate's code runs at 2.0 µs (graph), except:

* ``BLOCK_X == 128`` at ``tokens=16``: truly faster, 1.6 µs in every measurement;
* ``BLOCK_X == 64`` at ``tokens=4``: *lucky during the search*, measured 12% faster (as issue 12's
  identical code was in a fresh process), but 2.0 µs when the final check times it again.

Paired requests (``"paired": true`` in the job) get a small deterministic jitter, so that their
intervals are not degenerate. ``KTX_TEST_MEASURE_S`` makes each measurement sleep (seconds),
standing in for GPU time in the time-limit tests.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import Measurement, Status, Timing

_COUNT = itertools.count()


def true_us(shape: str, config: dict[str, int]) -> float:
    return 1.6 if config.get("BLOCK_X") == 128 and shape.startswith("tokens=16,") else 2.0


def handle(op: str, payload: Any) -> Any:
    if op == "device":
        return DeviceLimits().to_dict()
    assert op == "measure"
    time.sleep(float(os.environ.get("KTX_TEST_MEASURE_S", "0")))
    shape, config = payload["shape"], dict(payload["candidate"]["config"])
    us = true_us(shape, config)
    if payload.get("paired"):
        us *= 1.0 + 0.003 * (next(_COUNT) % 3 - 1)
    elif config.get("BLOCK_X") == 64 and shape.startswith("tokens=4,"):
        us /= 1.12
    kernel = os.path.basename(os.path.dirname(payload["spec"]))
    return Measurement(
        kernel=kernel, shape=shape, config=config, status=Status.OK, graph=Timing.of([us]),
        single=Timing.of([us + 2.0]), verified=tuple(sorted(payload["modules"])),
    ).to_dict()  # fmt: skip
