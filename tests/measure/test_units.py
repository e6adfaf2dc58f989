"""Measurement building blocks that need no GPU: dtypes, verification, occupancy, types, replay."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ktx.ir.errors import KtxError

from ktx.dtypes import bf16_decode, bf16_encode, decode, encode, fp8_table, poison
from ktx.measure.occupancy import DeviceLimits, occupancy
from ktx.measure.replay import ReplayBackend, save_results
from ktx.measure.types import (
    Candidate,
    Measurement,
    Resources,
    Status,
    Timing,
    config_key,
    original_candidate,
)
from ktx.measure.verify import compare, host_inputs, python_reference, round_seed, scalars
from ktx.spec import DEFAULT_TOLERANCE, ShapePoint
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_bf16_round_to_nearest_even() -> None:
    one = 0x3F80
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0); just above rounds up.
    assert bf16_encode(np.float32(1 + 2**-8)).item() == one
    assert bf16_encode(np.float32(1 + 2**-8 + 2**-20)).item() == one + 1
    assert bf16_encode(np.float32(1 + 3 * 2**-8)).item() == one + 2  # tie, odd below -> up to even
    assert np.isnan(bf16_decode(bf16_encode(np.float32("nan")))).all()
    x = np.random.default_rng(0).normal(size=1000).astype(np.float32)
    assert np.max(np.abs(bf16_decode(bf16_encode(x)) - x) / np.abs(x)) <= 2**-8


def test_fp8_codes_round_trip_and_saturate() -> None:
    table = fp8_table("fp8_e4m3")
    finite = [c for c in range(256) if np.isfinite(table[c])]
    assert len(finite) == 254 and table[0x7E] == 448.0 and table[0x01] == 2.0**-9
    codes = encode(table[finite], "fp8_e4m3")
    assert (decode(codes, "fp8_e4m3") == table[finite]).all()
    assert encode(np.array([1e6, -1e6]), "fp8_e4m3").tolist() == [0x7E, 0xFE]
    assert encode(np.array([1.0625]), "fp8_e4m3").tolist() == [0x38]  # tie -> even mantissa (1.0)
    e5 = fp8_table("fp8_e5m2")
    assert e5[0x7C] == math.inf and e5[0x7B] == 57344.0


def test_poison_patterns() -> None:
    assert np.isnan(decode(poison((3,), "bf16"), "bf16")).all()
    assert np.isnan(poison((2,), "fp32")).all()
    assert (poison((4,), "fp8_e4m3") == 0xFF).all() and np.isnan(
        decode(poison((1,), "fp8_e4m3"), "fp8_e4m3")
    ).all()
    assert (poison((2,), "int32") == -1).all()


def spec_silu():  # type: ignore[no-untyped-def]
    return load_spec(ROOT / "kernels" / "silu_and_mul")


def test_host_inputs_fresh_per_round_and_poisoned() -> None:
    spec = spec_silu()
    point = ShapePoint((("tokens", 2), ("d", 16)))
    a = host_inputs(spec, point, round_seed(spec, point, 0))
    b = host_inputs(spec, point, round_seed(spec, point, 1))
    again = host_inputs(spec, point, round_seed(spec, point, 0))
    assert a["input"].shape == (2, 32) and a["input"].dtype == np.uint16
    assert not np.array_equal(a["input"], b["input"])
    assert np.array_equal(a["input"], again["input"])
    assert np.isnan(decode(a["out"], "bf16")).all()
    assert scalars(spec, spec.env(point)) == {"d": 16}


def test_inf_fraction_for_lse() -> None:
    spec = load_spec(ROOT / "kernels" / "merge_attn_states")
    point = ShapePoint((("tokens", 256), ("heads", 32), ("head_dim", 128)))
    host = host_inputs(spec, point, 1)
    frac = float(np.isposinf(host["prefix_lse"]).mean())
    assert 0.07 < frac < 0.13
    assert host["prefix_lse"].dtype == np.float32


def test_python_reference_and_compare() -> None:
    spec = spec_silu()
    point = ShapePoint((("tokens", 3), ("d", 40)))
    host = host_inputs(spec, point, 7)
    from ktx.measure.verify import load_python_reference

    ref = python_reference(spec, point, host, load_python_reference(spec))
    out_arg = spec.args[0]
    tol = spec.tolerance_for(out_arg.dtype)
    good = encode(ref["out"], "bf16")
    assert compare(out_arg, good, ref["out"], tol, want_is_stored=False).ok
    wrong = encode(ref["out"] * 1.05, "bf16")
    result = compare(out_arg, wrong, ref["out"], tol, want_is_stored=False)
    assert not result.ok and "elements differ" in result.message
    unwritten = good.copy()
    unwritten[1, 5] = poison((1,), "bf16")[0]
    result = compare(out_arg, unwritten, good, tol, want_is_stored=True)
    assert (
        not result.ok
        and "NaN/Inf where the reference has none" in result.message
        and "(1, 5)" in result.message
    )


def test_compare_infinities_and_caps() -> None:
    spec = load_spec(ROOT / "kernels" / "merge_attn_states")
    lse = spec.args[1]
    want = np.array([1.0, -np.inf, 2.0], dtype=np.float32)
    assert compare(lse, want.copy(), want, DEFAULT_TOLERANCE["fp32"], True).ok
    bad = np.array([1.0, 0.0, 2.0], dtype=np.float32)
    assert not compare(lse, bad, want, DEFAULT_TOLERANCE["fp32"], True).ok
    from ktx.spec import Tolerance

    capped = compare(
        lse, np.array([101.0], np.float32), np.array([100.0], np.float32), Tolerance(0.1, 0, 0.5), True
    )
    assert not capped.ok and "exceeds the cap" in capped.message


def test_fp8_ulp_compare() -> None:
    spec = load_spec(ROOT / "kernels" / "per_token_group_quant_fp8")
    q = spec.args[1]
    tol = spec.tolerance_for(q.dtype)
    want = np.array([0x38, 0x40, 0xB8, 0x00], dtype=np.uint8)
    assert compare(q, np.array([0x39, 0x3F, 0xB9, 0x80], np.uint8), want, tol, True).ok
    assert not compare(q, np.array([0x3A, 0x40, 0xB8, 0x00], np.uint8), want, tol, True).ok
    assert not compare(q, np.array([0x7F, 0x40, 0xB8, 0x00], np.uint8), want, tol, True).ok  # NaN
    # a Python reference gives floats, rounded to fp8 before comparing codes
    assert compare(q, want, decode(want, q.dtype), tol, False).ok


def test_occupancy_limits() -> None:
    h100 = DeviceLimits()
    assert occupancy(h100, 256, 32, 0).occupancy == 1.0
    shared = occupancy(h100, 128, 32, 100_000)
    assert shared.limiter == "shared" and shared.blocks_per_sm == 2
    assert occupancy(h100, 32, 16, 0).limiter == "blocks"
    assert occupancy(h100, 1024, 255, 0).blocks_per_sm == 0
    assert occupancy(h100, 128, 32, 300_000).blocks_per_sm == 0
    assert DeviceLimits.from_dict(json.loads(json.dumps(h100.to_dict()))) == h100


def test_timing_percentiles() -> None:
    t = Timing.of([float(x) for x in range(1, 102)])
    assert (t.median_us, t.p10_us, t.p90_us, t.min_us, t.max_us, t.n) == (51.0, 11.0, 91.0, 1.0, 101.0, 101)
    with pytest.raises(ValueError):
        Timing.of([])


def sample_measurement(config: dict[str, int], shape: str, us: float) -> Measurement:
    return Measurement(
        kernel="silu_and_mul", shape=shape, config=config, status=Status.OK,
        single=Timing.of([us + 2, us + 3]), graph=Timing.of([us, us + 0.1]),
        resources=Resources(20, 0, 0, 0, 1024, 256, 8, 1.0, "warps", "nvcc"),
        grid=(4, 1, 1), block=(256, 1, 1), bytes=1000, bandwidth_gbs=100.0, verified=("a", "b"), rounds=3,
    )  # fmt: skip


def test_measurement_json_round_trip() -> None:
    m = sample_measurement({"VEC": 8}, "tokens=1,d=4096", 5.0)
    again = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again == m and again.time_us == m.graph_us == 5.05 and again.ok
    fail = Measurement(kernel="k", shape="s", config={}, status=Status.TIMEOUT, message="hung")
    assert Measurement.from_dict(json.loads(json.dumps(fail.to_dict()))) == fail
    assert fail.time_us is None


def test_candidate_round_trip_and_launch() -> None:
    spec = spec_silu()
    cand = original_candidate(spec)
    assert cand.label == "original" and cand.name_expression == "silu_and_mul_kernel<__nv_bfloat16>"
    assert Candidate.from_dict(json.loads(json.dumps(cand.to_dict()))) == cand
    point = spec.find_point("tokens=4,d=4096")
    assert cand.launch(spec, point) == ((4,), (256,), 0)
    tuned = Candidate(cand.source, cand.name_expression, ("tokens",), ("d // VEC",), "0", (), {"VEC": 16})
    assert tuned.launch(spec, point) == ((4,), (256,), 0)
    assert tuned.digest != cand.digest and config_key({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_replay_backend(tmp_path: Path) -> None:
    records = [
        sample_measurement({}, "tokens=1,d=4096", 4.0),
        sample_measurement({"VEC": 8}, "tokens=1,d=4096", 3.0),
        Measurement(
            kernel="silu_and_mul", shape="tokens=1,d=4096", config={"VEC": 2}, status=Status.WRONG_RESULT
        ),
    ]
    path = tmp_path / "rec.json"
    save_results(path, records, {"device": "test"})
    assert json.loads(path.read_text())["device"] == "test"
    replay = ReplayBackend.from_file(path, kernel="silu_and_mul")
    spec = spec_silu()
    base = original_candidate(spec)
    point = spec.find_point("tokens=1,d=4096")
    assert replay.measure(base, point).graph_us == pytest.approx(4.05)
    tuned = Candidate(base.source, base.name_expression, base.grid, base.block, config={"VEC": 8})
    assert replay.measure(tuned, point).graph_us == pytest.approx(3.05)
    wrong = Candidate(base.source, base.name_expression, base.grid, base.block, config={"VEC": 2})
    assert replay.measure(wrong, point).status is Status.WRONG_RESULT
    with pytest.raises(KtxError, match="no recorded measurement"):
        replay.measure(base, spec.find_point("tokens=4,d=4096"))
    assert len(replay) == 3 and replay.calls == 4
    assert len(ReplayBackend.from_file(path, kernel="other")) == 0
    from ktx.measure.backend import Backend

    assert isinstance(replay, Backend)


def test_compare_of_finite_values_keeps_the_masked_rules() -> None:
    """The all-finite shortcut (issue 23 item 6: a third of the float64 passes) gives the
    verdicts, errors and messages of the masked comparison it stands in for: a NaN matched on
    both sides sends the same values down the masked path, where it counts for nothing."""
    from ktx.spec import Tolerance

    lse = load_spec(ROOT / "kernels" / "merge_attn_states").args[1]
    rng = np.random.default_rng(3)
    want = rng.standard_normal(4096).astype(np.float64)
    tol = Tolerance(1e-4, 1e-4, 1e-2)

    def both(got: np.ndarray) -> tuple[Any, Any]:
        fast = compare(lse, got.astype(np.float32), want, tol, False)
        nan_want, nan_got = np.append(want, np.nan), np.append(got, np.nan).astype(np.float32)
        masked = compare(lse, nan_got, nan_want, tol, False)
        return fast, masked

    close = want + rng.uniform(-5e-5, 5e-5, want.size)
    fast, masked = both(close)
    assert fast.ok and masked.ok
    assert fast.max_abs_err == pytest.approx(masked.max_abs_err)
    assert fast.rel_err == pytest.approx(masked.rel_err) and 0 < fast.rel_err < 1e-4
    far = close.copy()
    far[17] += 0.5
    far[900] = want[900] + 4 * (1e-4 + 1e-4 * abs(want[900]))  # four times the tolerance there
    fast, masked = both(far)
    assert not fast.ok and not masked.ok
    assert "2 of 4096 elements differ" in fast.message and "first at (17,)" in fast.message
    assert "2 of 4097 elements differ" in masked.message and "first at (17,)" in masked.message
    capped = Tolerance(rtol=0.0, atol=1.0, max_abs=0.2)  # within atol, beyond the cap
    fast = compare(lse, far.astype(np.float32), want, capped, False)
    assert not fast.ok and "exceeds the cap 0.2" in fast.message
    # an infinity where the reference is finite still fails (the masked path sees it)
    inf = close.astype(np.float32)
    inf[3] = np.inf
    result = compare(lse, inf, want, tol, False)
    assert not result.ok and "NaN/Inf where the reference has none" in result.message
