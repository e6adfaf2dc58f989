"""The suite kernels on a GPU through CuPy/NVRTC: results against the float64 references.

Skipped without CuPy and a CUDA device. Run as a script (``python3 -m tests.kernels.test_gpu``)
it also prints a timing table: one launch at a time, L2 flushed before each, median of 100
CUDA-event timings, with the bytes each kernel must move and the copy bandwidth for scale.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ._suite import KERNELS_DIR, load_reference

try:
    import cupy as cp

    HAVE_GPU = cp.cuda.runtime.getDeviceCount() > 0
except Exception:
    cp = None
    HAVE_GPU = False

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not HAVE_GPU, reason="needs CuPy and a CUDA GPU"),
]

OPTIONS: tuple[str, ...] = ("-std=c++17",)
RNG = np.random.default_rng(0)


# ----------------------------------------------------------------------------------- helpers


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (nearest even), as uint16 bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_to_f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def rand_bf16(shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return bf16_round(RNG.standard_normal(shape).astype(np.float32) * scale)


def e4m3_to_f64(bits: np.ndarray) -> np.ndarray:
    b = bits.astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp = (b >> 3) & 0xF
    man = b & 0x7
    val = np.where(exp == 0, man / 8.0 * 2.0**-6, (1.0 + man / 8.0) * np.exp2(exp - 7.0))
    val = np.where((exp == 0xF) & (man == 0x7), np.nan, val)
    return sign * val


def kernel(name: str, expr: str, options: tuple[str, ...] = OPTIONS) -> Any:
    src = (KERNELS_DIR / name / "kernel.cu").read_text()
    module = cp.RawModule(code=src, options=options, name_expressions=[expr])
    return module.get_function(expr)


def check_bf16(out_bits: np.ndarray, ref: np.ndarray, what: str) -> None:
    """Every element within 1 bf16 rounding (+ fp32 noise) of the float64 reference."""
    out = bf16_to_f64(out_bits)
    assert not np.isnan(out).any(), f"{what}: NaN"
    scale = float(np.max(np.abs(ref))) if ref.size else 1.0
    err = np.abs(out - ref)
    bound = 2.0**-8 * np.abs(ref) + 1e-5 * scale + 1e-30
    worst = int(np.argmax(err / bound))
    assert np.all(err <= bound), (
        f"{what}: {int(np.sum(err > bound))} elements off, worst out={out.flat[worst]} ref={ref.flat[worst]}"
    )
    rel = np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)
    assert rel < 5e-3, f"{what}: relative error {rel}"


def poison_u16(shape: tuple[int, ...]) -> Any:
    return cp.full(shape, 0x7FC1, dtype=cp.uint16)  # a bf16 NaN: unwritten elements show up


# --------------------------------------------------------------------------------- the cases


@pytest.mark.parametrize("d", [4096, 11008, 14336, 13, 7, 1])
def test_silu_and_mul(d: int) -> None:
    tokens = 5
    f = kernel("silu_and_mul", "silu_and_mul_kernel<__nv_bfloat16>")
    x = rand_bf16((tokens, 2 * d), 2.0)
    out = poison_u16((tokens, d))
    f((tokens,), (max(1, min(d // 8, 256)),), (out, cp.asarray(x), np.int32(d)))
    ref = load_reference("silu_and_mul").reference(input=bf16_to_f64(x), d=d)["out"]
    check_bf16(cp.asnumpy(out), ref, f"silu_and_mul d={d}")


def _warps(d: int) -> int:
    return max(1, (min(1024, d // 8) + 31) // 32)


@pytest.mark.parametrize("d", [4096, 8192, 16384, 100, 3])
def test_fused_add_rmsnorm(d: int) -> None:
    tokens = 7
    f = kernel("fused_add_rmsnorm", "fused_add_rmsnorm_kernel<__nv_bfloat16>")
    x, r, w = rand_bf16((tokens, d)), rand_bf16((tokens, d)), rand_bf16((d,), 0.5)
    gx, gr = cp.asarray(x), cp.asarray(r)
    warps = _warps(d)
    smem = (((warps + 3) // 4) * 4 + d) * 4
    if smem > 48 * 1024:
        f.max_dynamic_shared_size_bytes = smem
    args = (gx, gr, cp.asarray(w), np.int32(d), np.float32(1e-6))
    f((tokens,), (32, warps), args, shared_mem=smem)
    ref = load_reference("fused_add_rmsnorm").reference(
        input=bf16_to_f64(x), residual=bf16_to_f64(r), weight=bf16_to_f64(w), eps=1e-6
    )
    summed = (bf16_to_f64(x) + bf16_to_f64(r)).astype(np.float32)
    np.testing.assert_array_equal(cp.asnumpy(gr), bf16_round(summed))
    check_bf16(cp.asnumpy(gx), ref["input"], f"fused_add_rmsnorm d={d}")


@pytest.mark.parametrize("d", [4096, 8192, 5120, 100, 3])
def test_rmsnorm(d: int) -> None:
    tokens = 7
    f = kernel("rmsnorm", "rmsnorm_kernel<__nv_bfloat16>")
    x, w = rand_bf16((tokens, d), 3.0), rand_bf16((d,), 0.5)
    out = poison_u16((tokens, d))
    warps = _warps(d)
    smem = ((warps + 3) // 4) * 4 * 4
    args = (out, cp.asarray(x), cp.asarray(w), np.int32(d), np.float32(1e-6))
    f((tokens,), (32, warps), args, shared_mem=smem)
    ref = load_reference("rmsnorm").reference(input=bf16_to_f64(x), weight=bf16_to_f64(w), eps=1e-6)["output"]
    check_bf16(cp.asnumpy(out), ref, f"rmsnorm d={d}")


@pytest.mark.parametrize("with_lse", [True, False])
@pytest.mark.parametrize(("tokens", "heads", "hd"), [(37, 32, 128), (3, 8, 256), (1, 1, 8)])
def test_merge_attn_states(tokens: int, heads: int, hd: int, with_lse: bool) -> None:
    f = kernel("merge_attn_states", "merge_attn_states_kernel<__nv_bfloat16>")
    pv, sv = rand_bf16((tokens, heads, hd)), rand_bf16((tokens, heads, hd))
    pl = (RNG.standard_normal((heads, tokens)) * 3).astype(np.float32)
    sl = (RNG.standard_normal((heads, tokens)) * 3).astype(np.float32)
    # about 10% of each side +inf or -inf (empty), and some (token, head) with both empty
    pl[RNG.random(pl.shape) < 0.05] = np.inf
    sl[RNG.random(sl.shape) < 0.05] = np.inf
    pl[RNG.random(pl.shape) < 0.05] = -np.inf
    sl[RNG.random(sl.shape) < 0.05] = -np.inf
    pl.flat[0], sl.flat[0] = np.inf, -np.inf
    out = poison_u16((tokens, heads, hd))
    olse = cp.full((heads, tokens), np.nan, dtype=cp.float32)
    lse_arg = olse if with_lse else np.uint64(0)
    total = tokens * heads * (hd // 8)
    args = (
        out,
        lse_arg,
        cp.asarray(pv),
        cp.asarray(pl),
        cp.asarray(sv),
        cp.asarray(sl),
        np.int32(tokens),
        np.int32(heads),
        np.int32(hd),
    )
    f(((total + 127) // 128,), (128,), args)
    ref = load_reference("merge_attn_states").reference(
        prefix_output=bf16_to_f64(pv), prefix_lse=pl, suffix_output=bf16_to_f64(sv), suffix_lse=sl
    )
    check_bf16(cp.asnumpy(out), ref["output"], "merge_attn_states output")
    got = cp.asnumpy(olse)
    if with_lse:
        np.testing.assert_allclose(got, ref["output_lse"], rtol=1e-5, atol=1e-5)
        assert np.isneginf(got.flat[0])
    else:
        assert np.isnan(got).all(), "output_lse written although nullptr was passed"


@pytest.mark.parametrize(("tokens", "hidden"), [(3, 7168), (1, 384), (16, 4096), (5, 1536)])
def test_per_token_group_quant_fp8(tokens: int, hidden: int) -> None:
    expr = "per_token_group_quant_8bit_kernel<__nv_bfloat16, __nv_fp8_e4m3>"
    f = kernel("per_token_group_quant_fp8", expr)
    group = 128
    x = rand_bf16((tokens, hidden), 4.0)
    x[0, :group] = 0  # an all-zero group: scale = eps / 448, q = 0
    num_groups = tokens * hidden // group
    gpb = next(g for g in (16, 8, 4, 2, 1) if num_groups % g == 0)
    q = cp.full((tokens, hidden), 0x7F, dtype=cp.uint8)  # e4m3 NaN
    s = cp.full((tokens, hidden // group), np.nan, dtype=cp.float32)
    args = (
        cp.asarray(x),
        q,
        s,
        np.int32(group),
        np.int32(num_groups),
        np.int32(gpb),
        np.float32(1e-10),
        np.float32(-448.0),
        np.float32(448.0),
    )
    f((num_groups // gpb,), (gpb * 16,), args)
    mod = load_reference("per_token_group_quant_fp8")
    ref = mod.reference(input=bf16_to_f64(x), group_size=group, eps=1e-10)
    np.testing.assert_allclose(cp.asnumpy(s), ref["output_s"], rtol=1e-6)
    got = e4m3_to_f64(cp.asnumpy(q))
    want = mod.round_e4m3(ref["output_q"])
    assert not np.isnan(got).any()
    off = got != want
    # a value on a rounding tie may go one e4m3 step the other way (fp32 vs float64 division)
    assert off.mean() < 1e-3, f"{int(off.sum())} of {off.size} fp8 codes differ"
    # ... and then by one step: 1/8 of the binade's lower end at most (subnormals: 2**-9)
    np.testing.assert_allclose(got, want, rtol=0.126, atol=2.0**-9)


@pytest.mark.parametrize(("topk", "d"), [(2, 4096), (8, 7168), (3, 100), (1, 5)])
def test_moe_sum(topk: int, d: int) -> None:
    tokens = 9
    f = kernel("moe_sum", f"moe_sum_kernel<__nv_bfloat16, {topk}>")
    x = rand_bf16((tokens, topk, d))
    out = poison_u16((tokens, d))
    f((tokens,), (min(d, 1024),), (out, cp.asarray(x), np.int32(d)))
    ref = load_reference("moe_sum").reference(input=bf16_to_f64(x))["out"]
    check_bf16(cp.asnumpy(out), ref, f"moe_sum topk={topk} d={d}")


@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize(("heads", "kv", "hd", "rot"), [(32, 8, 128, 128), (4, 1, 128, 64)])
def test_rope(neox: bool, heads: int, kv: int, hd: int, rot: int) -> None:
    tokens, max_pos = 11, 64
    expr = f"rotary_embedding_kernel<__nv_bfloat16, {'true' if neox else 'false'}>"
    f = kernel("rope", expr)
    pos = RNG.integers(0, max_pos, tokens).astype(np.int64)
    inv = 1.0 / (10000.0 ** (np.arange(0, rot, 2) / rot))
    ang = np.arange(max_pos)[:, None] * inv[None, :]
    cache = bf16_round(np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32))
    q, k = rand_bf16((tokens, heads, hd)), rand_bf16((tokens, kv, hd))
    gq, gk = cp.asarray(q), cp.asarray(k)
    args = (
        cp.asarray(pos),
        gq,
        gk,
        cp.asarray(cache),
        np.int32(rot),
        np.int64(heads * hd),
        np.int64(kv * hd),
        np.int32(heads),
        np.int32(kv),
        np.int32(hd),
    )
    f((tokens,), (min(heads * rot // 2, 512),), args)
    ref = load_reference("rope").reference(
        positions=pos,
        query=bf16_to_f64(q),
        key=bf16_to_f64(k),
        cos_sin_cache=bf16_to_f64(cache),
        rot_dim=rot,
        head_size=hd,
        is_neox=neox,
    )
    check_bf16(cp.asnumpy(gq), ref["query"], "rope query")
    check_bf16(cp.asnumpy(gk), ref["key"], "rope key")


# ------------------------------------------------------------------------------------ timing


def _time(fn: Callable[[], None], n: int = 100) -> float:
    l2 = cp.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
    flush = cp.empty(2 * l2 // 4 + 1024, dtype=cp.float32)
    for _ in range(5):
        fn()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(n):
        flush.fill(1.0)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1000.0)
    return float(np.median(times))


def _dev_bf16(shape: tuple[int, ...]) -> Any:
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    return (x.view(cp.uint32) >> 16).astype(cp.uint16)


def bench_cases(options: tuple[str, ...]) -> list[tuple[str, str, Callable[[], None], int]]:
    cases: list[tuple[str, str, Callable[[], None], int]] = []

    def silu(t: int, d: int) -> None:
        f = kernel("silu_and_mul", "silu_and_mul_kernel<__nv_bfloat16>", options)
        x, o = _dev_bf16((t, 2 * d)), cp.empty((t, d), cp.uint16)
        cases.append(
            (
                "silu_and_mul",
                f"{t}x{d}",
                lambda: f((t,), (max(1, min(d // 8, 256)),), (o, x, np.int32(d))),
                6 * t * d,
            )
        )

    def fadd(t: int, d: int) -> None:
        f = kernel("fused_add_rmsnorm", "fused_add_rmsnorm_kernel<__nv_bfloat16>", options)
        x, r, w = _dev_bf16((t, d)), _dev_bf16((t, d)), _dev_bf16((d,))
        wp = _warps(d)
        sm = (((wp + 3) // 4) * 4 + d) * 4
        if sm > 48 * 1024:
            f.max_dynamic_shared_size_bytes = sm
        args = (x, r, w, np.int32(d), np.float32(1e-6))
        cases.append(
            ("fused_add_rmsnorm", f"{t}x{d}", lambda: f((t,), (32, wp), args, shared_mem=sm), 8 * t * d)
        )

    def rms(t: int, d: int) -> None:
        f = kernel("rmsnorm", "rmsnorm_kernel<__nv_bfloat16>", options)
        x, w, o = _dev_bf16((t, d)), _dev_bf16((d,)), cp.empty((t, d), cp.uint16)
        wp = _warps(d)
        sm = ((wp + 3) // 4) * 16
        args = (o, x, w, np.int32(d), np.float32(1e-6))
        cases.append(("rmsnorm", f"{t}x{d}", lambda: f((t,), (32, wp), args, shared_mem=sm), 4 * t * d))

    def merge(t: int, h: int, hd: int) -> None:
        f = kernel("merge_attn_states", "merge_attn_states_kernel<__nv_bfloat16>", options)
        pv, sv, o = _dev_bf16((t, h, hd)), _dev_bf16((t, h, hd)), cp.empty((t, h, hd), cp.uint16)
        pl = cp.random.standard_normal((h, t), dtype=cp.float32)
        sl = cp.random.standard_normal((h, t), dtype=cp.float32)
        ol = cp.empty((h, t), cp.float32)
        g = (t * h * (hd // 8) + 127) // 128
        args = (o, ol, pv, pl, sv, sl, np.int32(t), np.int32(h), np.int32(hd))
        cases.append(
            ("merge_attn_states", f"{t}x{h}x{hd}", lambda: f((g,), (128,), args), 6 * t * h * hd + 12 * t * h)
        )

    def quant(t: int, hidden: int) -> None:
        expr = "per_token_group_quant_8bit_kernel<__nv_bfloat16, __nv_fp8_e4m3>"
        f = kernel("per_token_group_quant_fp8", expr, options)
        x, q = _dev_bf16((t, hidden)), cp.empty((t, hidden), cp.uint8)
        s = cp.empty((t, hidden // 128), cp.float32)
        ng = t * hidden // 128
        gpb = next(g for g in (16, 8, 4, 2, 1) if ng % g == 0)
        args = (
            x,
            q,
            s,
            np.int32(128),
            np.int32(ng),
            np.int32(gpb),
            np.float32(1e-10),
            np.float32(-448.0),
            np.float32(448.0),
        )
        cases.append(
            (
                "per_token_group_quant_fp8",
                f"{t}x{hidden}",
                lambda: f((ng // gpb,), (gpb * 16,), args),
                3 * t * hidden + 4 * ng,
            )
        )

    def moe(t: int, d: int, k: int) -> None:
        f = kernel("moe_sum", f"moe_sum_kernel<__nv_bfloat16, {k}>", options)
        x, o = _dev_bf16((t, k, d)), cp.empty((t, d), cp.uint16)
        cases.append(
            (
                "moe_sum",
                f"{t}x{d}xk{k}",
                lambda: f((t,), (min(d, 1024),), (o, x, np.int32(d))),
                2 * t * d * (k + 1),
            )
        )

    def rope(t: int, h: int, kv: int, hd: int) -> None:
        f = kernel("rope", "rotary_embedding_kernel<__nv_bfloat16, true>", options)
        pos = cp.random.randint(0, 4096, t).astype(cp.int64)
        q, k = _dev_bf16((t, h, hd)), _dev_bf16((t, kv, hd))
        cache = _dev_bf16((4096, hd))
        args = (
            pos,
            q,
            k,
            cache,
            np.int32(hd),
            np.int64(h * hd),
            np.int64(kv * hd),
            np.int32(h),
            np.int32(kv),
            np.int32(hd),
        )
        cases.append(
            (
                "rope",
                f"{t}x{h}/{kv}x{hd}",
                lambda: f((t,), (min(h * hd // 2, 512),), args),
                4 * t * (h + kv) * hd + 2 * t * hd + 8 * t,
            )
        )

    silu(1, 4096)
    silu(64, 14336)
    silu(1024, 11008)
    silu(4096, 14336)
    fadd(64, 4096)
    fadd(1024, 8192)
    fadd(4096, 8192)
    rms(64, 4096)
    rms(1024, 8192)
    rms(4096, 8192)
    merge(512, 32, 128)
    merge(1536, 64, 128)
    quant(768, 7168)
    quant(8192, 4096)
    quant(16384, 7168)
    moe(1024, 7168, 8)
    moe(4096, 4096, 2)
    rope(4096, 32, 8, 128)
    rope(16384, 32, 8, 128)
    return cases


def main() -> None:
    n = 1 << 28
    a, b = cp.empty(n, cp.uint8), cp.empty(n, cp.uint8)
    copy_us = _time(lambda: b.__setitem__(slice(None), a), 20)
    copy_gbps = 2 * n / copy_us / 1e3
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{name}: device-to-device copy {copy_gbps:.0f} GB/s (read + write)")
    results: dict[tuple[str, str], list[float]] = {}
    variants = [("precise", ("-std=c++17",)), ("fast", ("-std=c++17", "--use_fast_math"))]
    byte_counts: dict[tuple[str, str], int] = {}
    for _, opts in variants:
        for kname, shape, fn, nbytes in bench_cases(opts):
            results.setdefault((kname, shape), []).append(_time(fn))
            byte_counts[(kname, shape)] = nbytes
    print(f"{'kernel':26s} {'shape':16s} {'us':>8s} {'us fast':>8s} {'GB/s':>6s} {'%copy':>6s}")
    for (kname, shape), (t_precise, t_fast) in results.items():
        gbps = byte_counts[(kname, shape)] / t_fast / 1e3
        print(
            f"{kname:26s} {shape:16s} {t_precise:8.2f} {t_fast:8.2f} {gbps:6.0f} "
            f"{100 * gbps / copy_gbps:5.0f}%"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
