"""Quick, harness-independent check of the suite baselines against production figures.

Times the kernels the way the production figures were taken (one launch at a time, L2
flushed before each, median of 100 CUDA-event timings) so that a slow baseline is caught
before the real harness exists. Usage on a GPU host: python3 scripts/quick_baseline.py OUT.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OPTS = ("-std=c++17", "--use_fast_math")


def module(name: str, expr: str) -> cp.RawModule:
    src = (ROOT / "kernels" / name / "kernel.cu").read_text()
    return cp.RawModule(code=src, options=OPTS, name_expressions=[expr])


def bf16(shape: tuple[int, ...]) -> cp.ndarray:
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    return (x.view(cp.uint32) >> 16).astype(cp.uint16)


def timeit(fn, n: int = 100) -> tuple[float, float, float]:
    l2 = cp.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
    flush = cp.empty(2 * l2 // 4 + 1024, dtype=cp.float32)
    for _ in range(5):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(n):
        flush.fill(1.0)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1000.0)
    t = np.array(times)
    return float(np.median(t)), float(np.percentile(t, 10)), float(np.percentile(t, 90))


def silu(tokens: int, d: int):
    f = module("silu_and_mul", "silu_and_mul_kernel<__nv_bfloat16>").get_function(
        "silu_and_mul_kernel<__nv_bfloat16>"
    )
    x = bf16((tokens, 2 * d))
    out = cp.empty((tokens, d), dtype=cp.uint16)
    block = max(1, min(d // 8, 256))
    return lambda: f((tokens,), (block,), (out, x, np.int32(d))), 3 * tokens * d * 2


def fused_add_rmsnorm(tokens: int, d: int):
    f = module("fused_add_rmsnorm", "fused_add_rmsnorm_kernel<__nv_bfloat16>").get_function(
        "fused_add_rmsnorm_kernel<__nv_bfloat16>"
    )
    x, r, w = bf16((tokens, d)), bf16((tokens, d)), bf16((d,))
    warps = max(1, (min(1024, d // 8) + 31) // 32)
    smem = (((warps + 3) // 4) * 4 + d) * 4
    if smem > 48 * 1024:
        f.max_dynamic_shared_size_bytes = smem
    return (
        lambda: f((tokens,), (32, warps), (x, r, w, np.int32(d), np.float32(1e-6)), shared_mem=smem),
        5 * tokens * d * 2,
    )


def merge(tokens: int, heads: int, hd: int):
    f = module("merge_attn_states", "merge_attn_states_kernel<__nv_bfloat16>").get_function(
        "merge_attn_states_kernel<__nv_bfloat16>"
    )
    pv, sv = bf16((tokens, heads, hd)), bf16((tokens, heads, hd))
    pl = cp.random.standard_normal((heads, tokens), dtype=cp.float32)
    sl = cp.random.standard_normal((heads, tokens), dtype=cp.float32)
    out = cp.empty((tokens, heads, hd), dtype=cp.uint16)
    olse = cp.empty((heads, tokens), dtype=cp.float32)
    total = tokens * heads * (hd // 8)
    grid = (total + 127) // 128
    args = (out, olse, pv, pl, sv, sl, np.int32(tokens), np.int32(heads), np.int32(hd))
    return lambda: f((grid,), (128,), args), 3 * tokens * heads * hd * 2 + 3 * heads * tokens * 4


CASES = [
    ("silu_and_mul", "1x4096", silu, (1, 4096), 4.16),
    ("silu_and_mul", "64x14336", silu, (64, 14336), 8.26),
    ("silu_and_mul", "1024x11008", silu, (1024, 11008), 22.1),
    ("silu_and_mul", "4096x14336", silu, (4096, 14336), 88.8),
    ("fused_add_rmsnorm", "64x4096", fused_add_rmsnorm, (64, 4096), 5.02),
    ("fused_add_rmsnorm", "1024x8192", fused_add_rmsnorm, (1024, 8192), 22.2),
    ("fused_add_rmsnorm", "4096x8192", fused_add_rmsnorm, (4096, 8192), 71.3),
    ("merge_attn_states", "512x32x128", merge, (512, 32, 128), 7.94),
    ("merge_attn_states", "1536x64x128", merge, (1536, 64, 128), 24.7),
]


def main() -> None:
    props = cp.cuda.runtime.getDeviceProperties(0)
    rows = []
    for kernel, shape, make, args, prod in CASES:
        fn, nbytes = make(*args)
        med, p10, p90 = timeit(fn)
        rows.append(
            {
                "kernel": kernel,
                "shape": shape,
                "median_us": med,
                "p10_us": p10,
                "p90_us": p90,
                "production_us": prod,
                "ratio": med / prod,
                "bytes": nbytes,
                "gbps": nbytes / med / 1e3,
            }
        )
    result = {
        "device": props["name"].decode(),
        "date": time.strftime("%Y-%m-%d"),
        "method": "one launch at a time, L2 flushed (2x L2 fill) before each, CUDA events, median of 100",
        "flags": list(OPTS),
        "rows": rows,
    }
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(json.dumps(result, indent=2))
    print(f"{result['device']}  {result['method']}")
    print(f"{'kernel':20s} {'shape':12s} {'ours us':>8s} {'prod us':>8s} {'ratio':>6s} {'GB/s':>7s}")
    for r in rows:
        print(
            f"{r['kernel']:20s} {r['shape']:12s} {r['median_us']:8.2f} {r['production_us']:8.2f} "
            f"{r['ratio']:6.2f} {r['gbps']:7.0f}"
        )


if __name__ == "__main__":
    main()
