"""A stand-in for the GPU worker handler: answers like ktx.measure.gpu.handle, measures nothing."""

from __future__ import annotations

import os
import time
from typing import Any

from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import Measurement, Resources, Status, Timing


def handle(op: str, payload: Any) -> Any:
    if op == "device":
        return DeviceLimits().to_dict()
    assert op == "measure"
    source = payload["candidate"]["source"]
    if "KTX_TEST_HANG" in source:
        time.sleep(3600)
    if "KTX_TEST_DIE" in source:
        os._exit(9)
    for mod in payload["modules"].values():
        assert os.path.isfile(mod["cubin_path"]) and mod["lowered_name"]
    reference = payload["reference"]["kind"] if payload["reference"] else "none"
    compiler = next(iter(payload["modules"].values()))["compiler"]  # as ktx.measure.gpu reports it
    resources = Resources(32, 0, 0, 0, 1024, 256, 8, 1.0, "warps", compiler=compiler)
    kernel = os.path.basename(os.path.dirname(payload["spec"]))
    return Measurement(
        kernel=kernel, shape=payload["shape"], config=payload["candidate"]["config"], status=Status.OK,
        message=f"reference={reference}", graph=Timing.of([1.0]), verified=tuple(sorted(payload["modules"])),
        resources=resources, label=payload["candidate"].get("label", ""),
    ).to_dict()  # fmt: skip
