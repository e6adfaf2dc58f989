"""Guard zones around every verification buffer (issue 18, item 1), on the CPU: the worker's
guard code run with numpy, and the harness with the fake GPU worker, which routes a planted
"writes one pack past the end" kernel through the same code."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ktx.commands._original import failure_line
from ktx.dtypes import decode
from ktx.measure.compile import find_nvcc
from ktx.measure.guards import (
    GUARD_BYTES,
    GuardFault,
    check,
    guard_bytes,
    guarded_copy,
    is_spec_error,
    pattern,
    run_guarded,
    untouched_outputs,
)
from ktx.measure.harness import Harness
from ktx.measure.types import Status
from ktx.measure.verify import seeded_inputs
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[2]
FAKE = str(Path(__file__).with_name("fake_gpu.py")) + ":handle"
PLANT = "\n// KTX_TEST_OOB_PACK: the fake GPU writes one pack past the end of out\n"


def reach(view: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Elements ``start..stop`` of ``view``'s memory, beyond its ends: a pointer's view."""
    flat = view.reshape(-1)
    base = np.lib.stride_tricks.as_strided(flat, shape=(flat.size + 4096,), strides=flat.strides)
    return base[start:stop]


def test_guard_size_keeps_alignment() -> None:
    assert guard_bytes() == GUARD_BYTES >= 4096 and GUARD_BYTES % 256 == 0
    assert guard_bytes(4097) == 4352 and guard_bytes(1) == 256
    buf = guarded_copy("x", np.arange(10, dtype=np.float32), pattern(np), np)
    offset = buf.view.ctypes.data - buf.base.ctypes.data
    assert offset == GUARD_BYTES and offset % 16 == 0
    assert buf.view.tolist() == list(range(10)) and buf.count == 10


def test_pattern_takes_every_byte_value() -> None:
    p = pattern(np)
    assert p.size == GUARD_BYTES and len(set(p[:256].tolist())) == 256


def test_intact_guards_pass_and_each_side_is_named() -> None:
    poison = pattern(np)
    out = guarded_copy("out", np.zeros((4, 1024), dtype=np.uint16), poison, np)
    x = guarded_copy("x", np.ones(8, dtype=np.float32), poison, np)
    out.view[...] = 5  # every element written, nothing outside
    assert check([out, x], poison, np) == []
    # one bf16 pack (8 elements, 16 bytes) just past the end, from element 4096 + 3 on
    reach(out.view, 4096 + 3, 4096 + 11)[...] = 1
    found = check([out, x], poison, np)
    assert [v.message for v in found] == ["out: wrote past its end (first at element 4,096 + 3)"]
    # a store just before the start of x (a float 2 elements back)
    x.base[x.before - 8 : x.before - 4] = 0
    found = check([out, x], poison, np)
    assert [v.message for v in found][1] == "x: wrote before its start (first at element -2)"


def test_a_store_of_the_poison_value_itself_is_still_seen() -> None:
    """Writing the pattern's first byte everywhere past the end changes later guard bytes."""
    poison = pattern(np)
    out = guarded_copy("out", np.zeros(16, dtype=np.uint8), poison, np)
    reach(out.view, 16, 32)[...] = int(poison[0])
    assert check([out], poison, np)[0].message == "out: wrote past its end (first at element 16 + 1)"


def plant_launch(names: tuple[str, ...], pack: int = 8) -> object:
    def launch(arrays: dict[str, np.ndarray]) -> None:
        for name in names:
            arrays[name][...] = 0
        out = arrays["out"]
        reach(out, out.size, out.size + pack)[...] = 1

    return launch


def test_run_guarded_candidate_is_a_wrong_result_message_original_a_spec_error() -> None:
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=64")
    pristine = seeded_inputs(spec, point, 1, 0, np)
    launch = plant_launch(("out",))
    with pytest.raises(GuardFault) as cand:
        run_guarded(spec, point, pristine, launch, np)  # type: ignore[arg-type]
    assert cand.value.message == "shape tokens=4,d=64: out: wrote past its end (first at element 256 + 0)"
    assert not is_spec_error(cand.value.message)
    with pytest.raises(GuardFault) as orig:
        run_guarded(spec, point, pristine, launch, np, original=True)  # type: ignore[arg-type]
    text = orig.value.message
    assert is_spec_error(text) and "out: wrote past its end (first at element 256 + 0)" in text
    assert "[[args]] out shape = [tokens, d] = [4, 64] is too small" in text
    assert "ktx.toml:" in text  # the arg's line
    # a clean launch returns the outputs, which are the guarded views
    got = run_guarded(spec, point, pristine, lambda a: a["out"].fill(3), np)
    assert set(got) == {"out"} and (got["out"] == 3).all() and got["out"].shape == (4, 64)


needs_nvcc = pytest.mark.skipif(not find_nvcc(), reason="the harness compiles with nvcc here")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


@needs_nvcc
def test_planted_pack_past_the_end_is_a_wrong_result_never_dispatched(cache: Path) -> None:
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    with Harness(spec, handler=FAKE, timeout_s=60) as h:
        orig = h.measure(h.original, point)
        planted = replace(h.original, source=h.original.source + PLANT, config={"P": 1}, label="oob")
        bad = h.measure(planted, point)
        good = h.measure(replace(h.original, config={"P": 2}, label="good"), point)
    assert orig.status is Status.OK, orig.message
    assert bad.status is Status.WRONG_RESULT and not bad.ok and bad.graph is None
    assert bad.message == "shape tokens=4,d=4096: out: wrote past its end (first at element 16,384 + 0)"
    assert good.ok and not h.spec_errors


@needs_nvcc
@pytest.mark.parametrize("reference", ["python", "original"])
def test_an_original_writing_out_of_bounds_is_a_spec_error(cache: Path, reference: str) -> None:
    folder = cache / "silu_oob"
    shutil.copytree(ROOT / "kernels" / "silu_and_mul", folder)
    (folder / "kernel.cu").write_text((folder / "kernel.cu").read_text() + PLANT)
    spec = load_spec(folder)
    point = spec.find_point("tokens=4,d=4096")
    with Harness(spec, handler=FAKE, timeout_s=60, reference=reference) as h:  # type: ignore[arg-type]
        orig = h.measure(h.original, point)
        cand = h.measure(replace(h.original, config={"X": 1}, label="tuned"), point)
        # refused before compiling: a source that cannot compile is not even tried
        broken = h.measure(replace(h.original, source="#error planted\n", config={"Y": 1}), point)
    assert broken.status is Status.WRONG_RESULT and broken.message.startswith("not measured: spec error")
    assert orig.status is Status.WRONG_RESULT and is_spec_error(orig.message), orig.message
    assert "[[args]] out shape = [tokens, d] = [4, 4096] is too small" in orig.message
    assert point.name in h.spec_errors
    # never tuned against: a candidate at that shape is not measured, and says why
    assert cand.status is Status.WRONG_RESULT and cand.message.startswith("not measured: spec error:")
    line = failure_line(spec, orig)
    assert "look at [[args]] shape" in line and "[tolerance]" not in line


class _Stream:
    """The worker's stream, for numpy: a context that has nothing to wait for."""

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def synchronize(self) -> None:
        return None


def test_the_worker_launch_path_checks_guards(monkeypatch: pytest.MonkeyPatch) -> None:
    """ktx.measure.gpu's own launch path (_run_once, _run_reference) with numpy standing in for
    CuPy and a Python function for the kernel: one pack past the end of ``out``."""
    from ktx.measure import gpu
    from ktx.measure.protocol import WorkerFailure
    from ktx.measure.types import Resources

    monkeypatch.setattr(gpu, "_cupy", lambda: np)
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=2,d=64")
    pristine = seeded_inputs(spec, point, 1, 0, np)
    names = [a.name for a in spec.args]

    def kernel(
        grid: object, block: object, args: tuple[object, ...], shared_mem: int, stream: object
    ) -> None:
        out = args[names.index("out")]
        assert isinstance(out, np.ndarray)
        out[...] = 0
        reach(out, out.size, out.size + 8)[...] = 1

    res = Resources(32, 0, 0, 0, 1024, 64, 8, 1.0, "warps")
    bound = gpu._Bound(kernel, (2, 1, 1), (64, 1, 1), 0, res)
    with pytest.raises(gpu._Fail) as cand:
        gpu._run_once(spec, bound, point, pristine, _Stream())
    assert cand.value.status is Status.WRONG_RESULT and cand.value.resources is res
    assert cand.value.message == "shape tokens=2,d=64: out: wrote past its end (first at element 128 + 0)"
    with pytest.raises(WorkerFailure) as ref:
        gpu._run_reference(spec, bound, point, pristine, _Stream())
    assert ref.value.status == "wrong_result" and is_spec_error(ref.value.message) and not ref.value.fatal
    # pristine arrays are never written: the launch saw guarded copies
    assert (pristine["out"] == seeded_inputs(spec, point, 1, 0, np)["out"]).all()


def test_which_requests_check_the_original() -> None:
    from ktx.measure.gpu import checks_the_original
    from ktx.measure.types import original_candidate

    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    orig = original_candidate(spec)
    tuned = replace(orig, config={"X": 1})
    python = {"kind": "python", "original_digest": orig.digest}
    itself = {"kind": "original", "candidate": orig.to_dict()}
    assert checks_the_original(orig, python) and checks_the_original(orig, itself)
    assert not checks_the_original(tuned, python) and not checks_the_original(tuned, itself)
    assert not checks_the_original(orig, None)


@needs_nvcc
def test_each_worker_warms_up_once_before_its_first_measurement(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``device`` request starts the worker; its warm-up request must still come (issue 18:
    it never did, so the first measurement of every process ran without prime)."""
    log = cache / "warmups.txt"
    monkeypatch.setenv("KTX_TEST_WARMUP_LOG", str(log))
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    with Harness(spec, handler=FAKE, timeout_s=60, warm_workers=True) as h:
        h.device()  # starts the worker
        assert h.measure(h.original, point).ok
        assert h.measure(replace(h.original, config={"X": 1}), point).ok
        worker = h.supervisor.worker
        assert worker is not None
        pid = worker.info["pid"]
    assert log.read_text().split() == [str(pid)]  # once, in the worker that measured


# -- an output the original never writes (issue 21, item 3) -----------------------------------


def test_an_original_that_writes_no_element_of_an_out_is_a_spec_error_naming_it() -> None:
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=64")
    pristine = seeded_inputs(spec, point, 1, 0, np)
    with pytest.raises(GuardFault) as orig:
        run_guarded(spec, point, pristine, lambda arrays: None, np, original=True)
    text = orig.value.message
    assert is_spec_error(text) and orig.value.found == ()
    assert "the original kernel leaves out entirely at its poison at tokens=4,d=64" in text
    assert '[[args]] out is role = "out": is its role "in"?' in text
    assert "ktx.toml:10:" in text  # the [[args]] entry of out
    # a candidate that writes nothing is not a spec error here: its comparison fails it
    got = run_guarded(spec, point, pristine, lambda arrays: None, np)
    assert np.isnan(decode(got["out"], spec.args[0].dtype)).all()


def test_one_written_element_clears_an_output_and_each_untouched_one_is_named() -> None:
    spec = load_spec(ROOT / "kernels" / "per_token_group_quant_fp8")
    point = spec.shape_set().points[0]
    for r in (0, 1):  # the byte poison of fp8 differs per round: compared with that round's
        pristine = seeded_inputs(spec, point, 1, r, np)

        def one_element(arrays: dict[str, np.ndarray]) -> None:
            arrays["output_q"].reshape(-1)[-1] = 0x38  # 1.0 in e4m3

        with pytest.raises(GuardFault) as orig:
            run_guarded(spec, point, pristine, one_element, np, original=True)
        assert "leaves output_s entirely at its poison" in orig.value.message
        assert "output_q" not in orig.value.message.split(" at ")[0]
        assert untouched_outputs(spec, pristine, {"output_q": pristine["output_q"]}, np) == ["output_q"]

        def both(arrays: dict[str, np.ndarray]) -> None:
            one_element(arrays)
            arrays["output_s"][0, 0] = 2.0

        got = run_guarded(spec, point, pristine, both, np, original=True)
        assert set(got) == {"output_q", "output_s"}


def test_an_original_that_writes_the_poison_value_itself_is_no_spec_error() -> None:
    """The sign8 case of tests/measure/test_gpu_verify.py: every element written as int8 -1,
    which is round 0's 0xFF poison byte for byte. The second launch, with the poison inverted,
    sees the writes; a launch that writes nothing stays unchanged in both."""
    spec = load_spec(ROOT / "kernels" / "per_token_group_quant_fp8")
    point = spec.shape_set().points[0]
    pristine = seeded_inputs(spec, point, 1, 0, np)
    launches = []

    def poison_valued(arrays: dict[str, np.ndarray]) -> None:
        launches.append(1)
        arrays["output_q"].reshape(-1).view(np.uint8)[...] = 0xFF  # equal to round 0's poison
        arrays["output_s"][...] = 1.0

    got = run_guarded(spec, point, pristine, poison_valued, np, original=True)
    assert (got["output_q"].view(np.uint8) == 0xFF).all() and len(launches) == 2
    launches.clear()
    with pytest.raises(GuardFault) as orig:
        run_guarded(spec, point, pristine, lambda arrays: launches.append(1), np, original=True)
    assert "leaves output_q, output_s entirely at its poison" in orig.value.message and len(launches) == 2
    launches.clear()
    run_guarded(spec, point, pristine, lambda arrays: launches.append(1), np)  # a candidate: one launch
    assert len(launches) == 1


def test_the_worker_reference_path_refuses_an_original_that_writes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ktx.measure import gpu
    from ktx.measure.protocol import WorkerFailure
    from ktx.measure.types import Resources

    monkeypatch.setattr(gpu, "_cupy", lambda: np)
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=2,d=64")
    pristine = seeded_inputs(spec, point, 1, 0, np)

    def kernel(
        grid: object, block: object, args: tuple[object, ...], shared_mem: int, stream: object
    ) -> None:
        return None  # reads its inputs, writes nothing

    res = Resources(32, 0, 0, 0, 1024, 64, 8, 1.0, "warps")
    bound = gpu._Bound(kernel, (2, 1, 1), (64, 1, 1), 0, res)
    with pytest.raises(WorkerFailure) as ref:
        gpu._run_reference(spec, bound, point, pristine, _Stream())
    assert ref.value.status == "wrong_result" and is_spec_error(ref.value.message)
    assert "leaves out entirely at its poison" in ref.value.message
    assert not ref.value.fatal


@needs_nvcc
@pytest.mark.parametrize("reference", ["python", "original"])
def test_an_original_that_writes_nothing_stops_every_candidate_at_that_shape(
    cache: Path, reference: str
) -> None:
    folder = cache / "silu_nowrite"
    shutil.copytree(ROOT / "kernels" / "silu_and_mul", folder)
    (folder / "kernel.cu").write_text((folder / "kernel.cu").read_text() + "\n// KTX_TEST_NO_WRITE\n")
    spec = load_spec(folder)
    point = spec.find_point("tokens=4,d=4096")
    with Harness(spec, handler=FAKE, timeout_s=60, reference=reference) as h:  # type: ignore[arg-type]
        cand = h.measure(replace(h.original, config={"X": 1}, label="tuned"), point)
        orig = h.measure(h.original, point)
    assert orig.status is Status.WRONG_RESULT and is_spec_error(orig.message), orig.message
    assert "leaves out entirely at its poison" in orig.message and 'is its role "in"?' in orig.message
    assert point.name in h.spec_errors
    # measured first (the candidate asked), the original's spec error refused the candidate
    assert cand.status is Status.WRONG_RESULT and cand.message.startswith("not measured: spec error:")
    line = failure_line(spec, orig)
    assert "look at [[args]] role" in line and "[[args]] shape" not in line
