"""A stand-in for the GPU worker handler: answers like ktx.measure.gpu.handle, measures nothing.

A source carrying ``KTX_TEST_OOB_PACK`` models a kernel that also writes one pack (16 bytes)
past the end of its first output, one carrying ``KTX_TEST_NO_WRITE`` a kernel that writes none:
its verification runs through the worker's own guard-zone
code (:func:`ktx.measure.guards.run_guarded`) on numpy arrays, the store going through a
pointer-like strided view, so the CPU tests see what the GPU worker would report.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from ktx.measure.gpu import checks_the_original
from ktx.measure.guards import GuardFault, is_spec_error, run_guarded
from ktx.measure.occupancy import DeviceLimits
from ktx.measure.protocol import WorkerFailure
from ktx.measure.types import Candidate, Measurement, Resources, Status, Timing
from ktx.measure.verify import seeded_inputs
from ktx.spec import ShapePoint, Spec
from ktx.specload import load_spec

OOB = "KTX_TEST_OOB_PACK"
#: A source carrying this models a kernel that writes none of its outputs.
NO_WRITE = "KTX_TEST_NO_WRITE"
PACK_BYTES = 16


def _oob_launch(spec: Spec, source: str) -> Any:
    """A numpy "kernel": writes 1 to every output element, and, when ``source`` is planted,
    one 16-byte pack just past the end of the first output (through a strided view that reaches
    beyond the array, as a pointer does)."""

    def launch(arrays: dict[str, Any]) -> None:
        if NO_WRITE in source:
            return
        outs = [a for a in spec.args if a.is_output]
        for arg in outs:
            arrays[arg.name][...] = 1
        if OOB in source and outs:
            flat = arrays[outs[0].name].reshape(-1)
            extra = PACK_BYTES // flat.itemsize
            reach = np.lib.stride_tricks.as_strided(flat, shape=(flat.size + extra,), strides=flat.strides)
            reach[flat.size :] = 7

    return launch


def _guarded_verify(payload: dict[str, Any]) -> str | None:
    """Run the candidate (and an original reference) under guards; the failure message, if any."""
    spec = load_spec(payload["spec"])
    point = ShapePoint.from_name(payload["shape"])
    cand = Candidate.from_dict(payload["candidate"])
    reference = payload["reference"]
    pristine = seeded_inputs(spec, point, 1, 0, np)
    if reference and reference.get("kind") == "original":
        ref_source = reference["candidate"]["source"]
        try:
            run_guarded(spec, point, pristine, _oob_launch(spec, ref_source), np, original=True)
        except GuardFault as exc:  # as ktx.measure.gpu._run_reference raises it
            assert is_spec_error(exc.message)
            raise WorkerFailure(Status.WRONG_RESULT.value, exc.message) from None
    try:
        original = checks_the_original(cand, reference)
        run_guarded(spec, point, pristine, _oob_launch(spec, cand.source), np, original)
    except GuardFault as exc:
        return exc.message
    return None


def handle(op: str, payload: Any) -> Any:
    if op == "device":
        return DeviceLimits().to_dict()
    if op == "warmup":  # recorded where the test asks (KTX_TEST_WARMUP_LOG), one line per request
        log = os.environ.get("KTX_TEST_WARMUP_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"{os.getpid()}\n")
        return {"fake": True}
    assert op == "measure"
    source = payload["candidate"]["source"]
    if "KTX_TEST_HANG" in source:
        time.sleep(3600)
    if "KTX_TEST_DIE" in source:
        os._exit(9)
    for mod in payload["modules"].values():
        assert os.path.isfile(mod["cubin_path"]) and mod["lowered_name"]
    reference = payload["reference"]["kind"] if payload["reference"] else "none"
    planted = any(p in source or p in str(payload["reference"]) for p in (OOB, NO_WRITE))
    failed = _guarded_verify(payload) if planted else None
    compiler = next(iter(payload["modules"].values()))["compiler"]  # as ktx.measure.gpu reports it
    resources = Resources(32, 0, 0, 0, 1024, 256, 8, 1.0, "warps", compiler=compiler)
    kernel = os.path.basename(os.path.dirname(payload["spec"]))
    return Measurement(
        kernel=kernel, shape=payload["shape"], config=payload["candidate"]["config"],
        status=Status.OK if failed is None else Status.WRONG_RESULT,
        message=failed or f"reference={reference}",
        graph=Timing.of([1.0]) if failed is None else None, verified=tuple(sorted(payload["modules"])),
        resources=resources, label=payload["candidate"].get("label", ""),
    ).to_dict()  # fmt: skip
