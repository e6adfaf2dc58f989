"""The device-side verification logic, run with numpy as the array module (the GPU worker runs
the same code with cupy): comparison semantics, poison that changes between rounds, seeded
inputs, and the disk cache of the original's verdict against the Python reference."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ktx.dtypes import POISON_BYTES, bf16_encode, decode, encode, fp8_encode, poison, poison_byte
from ktx.measure.refcache import Verdict, VerdictCache, spec_digest, verdict_key
from ktx.measure.verify import compare, seeded_inputs
from ktx.spec import DEFAULT_TOLERANCE, Arg, Tolerance
from ktx.specload import load_spec

EXACT = Tolerance(0.0, 0.0, 0.0)

ROOT = Path(__file__).resolve().parents[2]


def arg_of(dtype: str) -> Arg:
    """An output argument of ``dtype`` from a suite spec, retyped."""
    from dataclasses import replace

    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    out = next(a for a in spec.args if a.name == "out")
    from ktx.dtypes import DTYPES

    return replace(out, dtype=DTYPES[dtype])


def test_bf16_encoder_rounds_to_nearest_even_like_float64_arithmetic() -> None:
    x = np.random.default_rng(3).normal(size=4096).astype(np.float32) * 100
    bits = bf16_encode(x)
    # nearest bf16 by brute force: the two candidates around x, ties to the even code
    down = (x.view(np.uint32) >> 16).astype(np.uint16)
    up = down + 1
    dv, uv = decode(down, "bf16"), decode(up, "bf16")
    pick_up = (np.abs(uv - x) < np.abs(dv - x)) | ((np.abs(uv - x) == np.abs(dv - x)) & (up % 2 == 0))
    assert (bits == np.where(pick_up, up, down)).all()


def test_fp8_encoder_saturates_and_keeps_nan() -> None:
    codes = fp8_encode(np.array([1e9, -1e9, np.nan, 0.0, -0.0]), "fp8_e4m3")
    assert codes.tolist() == [0x7E, 0xFE, 0x7F, 0x00, 0x80]
    assert fp8_encode(np.array([1e9, np.inf]), "fp8_e5m2").tolist() == [0x7B, 0x7B]


def test_poison_bytes_change_between_rounds() -> None:
    rounds = [poison((4,), "int8", r) for r in range(len(POISON_BYTES))]
    assert [int(p.view(np.uint8)[0]) for p in rounds] == list(POISON_BYTES)
    assert rounds[0][0] == -1 and len({int(p[0]) for p in rounds}) == len(rounds)
    # fp8 poison stays a NaN code in every round; floats stay NaN
    for r in range(4):
        assert np.isnan(decode(poison((2,), "fp8_e4m3", r), "fp8_e4m3")).all()
        assert np.isnan(decode(poison((2,), "bf16", r), "bf16")).all()
    assert poison_byte("int32", 1) == 0xA5 and (poison((1,), "int32", 1).view(np.uint8) == 0xA5).all()


def test_an_unwritten_int8_element_is_caught_in_a_later_round() -> None:
    """The reference writes -1 everywhere; a candidate skips element 5. Under 0xFF poison the
    skipped element reads -1 and matches by chance; the next round's poison does not."""
    arg = arg_of("int8")
    tol = EXACT  # integers compare exactly (Spec.tolerance_for)
    want = np.full((2, 8), -1, dtype=np.int8)
    verdicts = []
    for r in range(3):
        got = poison((2, 8), "int8", r).copy()
        flat = got.reshape(-1)
        flat[:5] = -1
        flat[6:] = -1  # element (0, 5) left unwritten
        verdicts.append(compare(arg, got, want, tol, True, np))
    assert verdicts[0].ok, "0xFF poison is -1: round 1 alone cannot see the hole"
    assert not verdicts[1].ok
    assert "first at (0, 5): got -91, want -1" in verdicts[1].message
    assert "1 of 16 elements differ" in verdicts[1].message


def test_float_comparison_semantics() -> None:
    arg = arg_of("fp32")
    tol = DEFAULT_TOLERANCE["fp32"]
    want = np.array([[1.0, 2.0, np.inf], [np.nan, -3.0, 0.0]], dtype=np.float32)
    same = compare(arg, want.copy(), want, tol, True, np)
    assert same.ok and same.max_abs_err == 0.0
    close = want.copy()
    close[1, 1] = -3.0 * (1 + 5e-5)  # within rtol 1e-4
    assert compare(arg, close, want, tol, True, np).ok
    far = want.copy()
    far[1, 1] = -3.01
    bad = compare(arg, far, want, tol, True, np)
    assert not bad.ok and "first at (1, 1): got -3.01, want -3" in bad.message
    nan = want.copy()
    nan[0, 1] = np.nan
    worse = compare(arg, nan, want, tol, True, np)
    assert not worse.ok and "NaN/Inf where the reference has none" in worse.message
    assert worse.max_abs_err == float("inf")
    inf_lost = want.copy()
    inf_lost[0, 2] = 1e30
    assert not compare(arg, inf_lost, want, tol, True, np).ok, "infinities must match"
    # float64 Python-reference values, and the max_abs cap
    capped = compare(arg, np.full((1, 1), 0.5, np.float32), np.zeros((1, 1)), tol, False, np)
    assert not capped.ok


def test_fp8_codes_within_one_ulp() -> None:
    arg = arg_of("fp8_e4m3")
    tol = DEFAULT_TOLERANCE["fp8_e4m3"]
    want = encode(np.array([1.0, 2.0, -4.0]), "fp8_e4m3")
    near = want.copy()
    near[1] += 1  # one ulp up
    assert compare(arg, near, want, tol, True, np).ok
    far = want.copy()
    far[2] += 2
    result = compare(arg, far, want, tol, True, np)
    assert not result.ok and "more than 1 ulp apart" in result.message and "first at (2,)" in result.message


def test_seeded_inputs_reproduce_and_poison_by_round() -> None:
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    a = seeded_inputs(spec, point, 11, 0, np)
    again = seeded_inputs(spec, point, 11, 0, np)
    other = seeded_inputs(spec, point, 12, 1, np)
    assert (a["input"] == again["input"]).all() and not (a["input"] == other["input"]).all()
    assert a["input"].dtype == np.uint16 and a["input"].shape == (4, 8192)
    assert np.isnan(decode(a["out"], "bf16")).all()


def test_reference_verdicts_cached_by_spec_digest(tmp_path: Path) -> None:
    folder = tmp_path / "silu"
    shutil.copytree(ROOT / "kernels" / "silu_and_mul", folder, ignore=shutil.ignore_patterns("recorded"))
    spec = load_spec(folder)
    digest = spec_digest(spec)
    assert digest == spec_digest(load_spec(folder)), "stable across loads"
    cache = VerdictCache(tmp_path / "cache")
    key = verdict_key(digest, "tokens=1,d=4096", 123, 0, "cupy", "H200|sm_90")
    assert cache.get(digest, key) is None
    cache.put(digest, key, Verdict(True, 0.01, 0.002))
    assert cache.get(digest, key) == Verdict(True, 0.01, 0.002)
    assert cache.get(digest, verdict_key(digest, "tokens=1,d=4096", 123, 1, "cupy", "H200|sm_90")) is None
    # a failing verdict is never kept: the original is checked again next time
    bad_key = verdict_key(digest, "tokens=4,d=4096", 5, 0, "cupy", "H200|sm_90")
    cache.put(digest, bad_key, Verdict(False, 9.0, 1.0, "out differs"))
    assert cache.get(digest, bad_key) is None
    # editing the Python reference (or the kernel, or the spec) makes another digest
    ref = folder / "reference.py"
    ref.write_text(ref.read_text() + "\n# edited\n")
    changed = spec_digest(load_spec(folder))
    assert changed != digest and cache.get(changed, key) is None
    (folder / "kernel.cu").write_text((folder / "kernel.cu").read_text() + "\n// edited\n")
    assert spec_digest(load_spec(folder)) not in (digest, changed)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32", "int8", "fp8_e5m2"])
def test_bit_identical_outputs_pass_without_arithmetic(dtype: str) -> None:
    arg = arg_of(dtype)
    stored = poison((3, 3), dtype, 2).copy()
    result = compare(arg, stored, stored.copy(), DEFAULT_TOLERANCE.get(dtype, EXACT), True, np)
    assert result.ok


SUITE = sorted(p.parent for p in (ROOT / "kernels").glob("*/ktx.toml"))


@pytest.mark.parametrize("folder", SUITE, ids=lambda p: p.name)
def test_prime_runs_the_verification_path_for_every_suite_dtype(folder: Path) -> None:
    """What a fresh GPU worker runs before its first timed request, here with numpy."""
    from ktx.measure.gpu import prime

    prime(load_spec(folder), np)
