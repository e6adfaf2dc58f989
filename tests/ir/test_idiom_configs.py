"""Every config of the passes on the idioms ktx.ir.affine reads compiles for sm_90, and verifies.

The cases are the rewriting goldens of issue 11's idioms (a block size written as a macro, a
grid-stride ``while`` over rows, ``__ldg``/``__stcs``, a loop strided by the macro block size,
``#if`` branches of whole statements, a user's own ``KTX_`` macros). For each, the template's
whole knob space is instantiated:

* on the CPU, each case's configs go into one translation unit (one namespace per config, its
  macros undefined after it) built with ``nvcc -std=c++17 -arch=sm_90 -c``, host code included;
* on a GPU (``gpu`` marker, CuPy), the original kernel and every config run on seeded inputs,
  outputs poisoned with NaN first, at sizes that leave tails (``C = 1003``), and each config's
  outputs must match the original's. The launch of a config is the template's launch mapping
  evaluated at that config (at the default config it is the original launch).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ktx.ir import parse
from ktx.ir.expr import Expr

from ktx.pipeline import run
from ktx.template import Template

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
NVCC = shutil.which("nvcc")


@dataclass(frozen=True)
class Case:
    golden: str
    pipeline: str
    kernel: str
    args: tuple[tuple[str, str, str], ...]
    """``(name, role, size or value)``: role ``in``/``out``/``inout`` float32 arrays of the size
    expression, or ``int`` scalars; expressions are over the shape ``env``."""
    envs: tuple[dict[str, int], ...]
    launch: Callable[[dict[str, int]], tuple[tuple[int, ...], tuple[int, ...]]] | None = None
    """Grid and block when the file has no launcher (else the template's mapping says)."""


CASES = (
    Case(
        "block_size/macro_block.cu",
        "block-size",
        "row_normalize",
        (("out", "out", "rows * C"), ("in", "in", "rows * C"), ("rows", "int", "rows"), ("C", "int", "C")),
        ({"rows": 37, "C": 1003},),
    ),
    Case(
        "block_size/macro_one_per_thread.cu",
        "block-size",
        "residual",
        (("out", "out", "N"), ("a", "in", "N"), ("b", "in", "N"), ("N", "int", "N")),
        ({"N": 100003},),
    ),
    Case(
        "split/while_rows_macro.cu",
        "split",
        "rows_scale",
        (
            ("out", "out", "rows * C"),
            ("inp", "in", "rows * C"),
            ("w", "in", "C"),
            ("rows", "int", "rows"),
            ("C", "int", "C"),
        ),
        ({"rows": 37, "C": 1003}, {"rows": 1500, "C": 64}),
    ),
    Case(
        "rows_per_block/while_rows.cu",
        "rows-per-block",
        "row_square",
        (("out", "out", "rows * C"), ("inp", "in", "rows * C"), ("rows", "int", "rows"), ("C", "int", "C")),
        ({"rows": 64, "C": 77}, {"rows": 192, "C": 33}),
    ),
    Case(
        "cache_hints/ldg.cu",
        "cache-hints",
        "gelu_ldg",
        (("out", "out", "N"), ("inp", "in", "N"), ("N", "int", "N")),
        ({"N": 100003},),
        lambda env: (((env["N"] + 127) // 128,), (128,)),
    ),
    Case(
        "idioms/vectorize_macro_stride.cu",
        "vectorize",
        "row_sum",
        (("sums", "out", "rows"), ("in", "in", "rows * C"), ("C", "int", "C")),
        ({"rows": 37, "C": 1003}, {"rows": 16, "C": 1024}),
    ),
    Case(
        "idioms/preproc_whole_statements.cu",
        "split",
        "scale_rows",
        (("out", "out", "rows * C"), ("in", "in", "rows * C"), ("C", "int", "C")),
        ({"rows": 37, "C": 1003},),
    ),
    Case(
        "idioms/user_ktx_macro.cu",
        "block-size",
        "scale",
        (("x", "inout", "n"), ("n", "int", "n")),
        ({"n": 100003},),
    ),
)
IDS = [c.golden for c in CASES]


def template(case: Case) -> Template:
    path = GOLDEN / case.golden
    return run(path.read_text(), case.pipeline, path=str(path))


def configs(t: Template) -> list[dict[str, int]]:
    """Every config of the space (the idioms' spaces are small)."""
    found: list[dict[str, int]] = [{}]
    for knob in t.knobs:
        found = [{**c, knob.name: v} for c in found for v in knob.values]
    return found


def size(expr: str, env: dict[str, int]) -> int:
    return Expr.parse(expr).evaluate_int(dict(env))


def device_code(source: str) -> str:
    """``source`` with host functions blanked (NVRTC compiles device code only)."""
    m = parse(source)
    data = bytearray(source.encode())
    for fn in m.functions:
        if not fn.is_kernel and not fn.is_device:
            for i in range(fn.span.start, fn.span.end):
                if data[i] not in (0x0A, 0x0D):
                    data[i] = 0x20
    return data.decode()


@pytest.mark.slow
def test_every_config_compiles_for_sm90() -> None:
    if NVCC is None:
        pytest.skip("nvcc is not on PATH")
    units: list[tuple[str, str]] = []
    for case in CASES:
        t = template(case)
        parts: list[str] = []
        for i, config in enumerate(configs(t)):
            code = t.instantiate(config)
            macros = sorted(set(re.findall(r"(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)", code)))
            parts.append(f"namespace ktx_c{i} {{\n{code}\n}}\n" + "".join(f"#undef {m}\n" for m in macros))
        units.append((case.golden, "#include <algorithm>\n#include <cuda_runtime.h>\n" + "".join(parts)))
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i, (name, text) in enumerate(units):
            src = Path(tmp) / f"unit{i}.cu"
            src.write_text(text)
            obj = str(src.with_suffix(".o"))
            cmd = [NVCC or "nvcc", "-std=c++17", "-arch=sm_90", "-c", str(src), "-o", obj]
            procs.append((name, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
            if len(procs) % 2 == 0:  # two at a time: the machine has two cores
                for n, p in procs[-2:]:
                    out, _ = p.communicate()
                    if p.returncode:
                        failures.append(f"{n}: {out.decode()[-2000:]}")
        for n, p in procs[len(procs) - len(procs) % 2 :]:
            out, _ = p.communicate()
            if p.returncode:
                failures.append(f"{n}: {out.decode()[-2000:]}")
    assert not failures, "\n".join(failures)


def test_the_cases_expose_knobs() -> None:
    for case in CASES:
        t = template(case)
        assert t.knobs, case.golden
        assert len(configs(t)) > 1
        if case.launch is None:
            assert t.launch() is not None, case.golden


# -- on a GPU ------------------------------------------------------------------------------------


def _launch(case: Case, t: Template, config: dict[str, int], env: dict[str, int]) -> Any:
    if case.launch is not None:
        return case.launch(env)
    mapping = t.launch()
    assert mapping is not None
    grid, block, _ = mapping.evaluate({**t.space.complete(config), **env})
    return grid, block


def _run(
    cp: Any, case: Case, source: str, grid: Any, block: Any, inputs: dict[str, Any], env: dict[str, int]
) -> dict[str, Any]:
    module = cp.RawModule(code=device_code(source), options=("-std=c++17",), name_expressions=[case.kernel])
    fn = module.get_function(case.kernel)
    args: list[Any] = []
    outs: dict[str, Any] = {}
    for name, role, expr in case.args:
        if role == "int":
            args.append(cp.int32(size(expr, env)))
            continue
        if role in ("in", "inout"):
            arr = inputs[name].copy()
        else:
            arr = cp.full(inputs[name].shape, cp.nan, cp.float32)
        if role != "in":
            outs[name] = arr
        args.append(arr)
    fn(tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block)), tuple(args))
    cp.cuda.runtime.deviceSynchronize()
    return {k: cp.asnumpy(v) for k, v in outs.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_config_matches_the_original_on_a_gpu(case: Case) -> None:
    cp = pytest.importorskip("cupy")
    import numpy as np

    t = template(case)
    original = (GOLDEN / case.golden).read_text()
    for env in case.envs:
        rng = np.random.default_rng(11)
        inputs = {
            name: cp.asarray((rng.random(size(expr, env)) + 0.5).astype(np.float32))
            for name, role, expr in case.args
            if role != "int"
        }
        grid0, block0 = _launch(case, t, {}, env)
        want = _run(cp, case, original, grid0, block0, inputs, env)
        checked = 0
        for config in configs(t):
            if not t.space.feasible(config, env):
                continue
            grid, block = _launch(case, t, config, env)
            if int(np.prod(block)) > 1024:
                continue
            got = _run(cp, case, t.instantiate(config), grid, block, inputs, env)
            for name, ref in want.items():
                out = got[name]
                assert not np.isnan(out).any(), f"{case.golden} {config} {env}: {name} has unwritten elements"
                err = np.abs(out - ref)
                bound = 1e-4 * np.abs(ref) + 1e-6 * float(np.max(np.abs(ref)))
                assert np.all(err <= bound), f"{case.golden} {config} {env}: {name} off by {float(err.max())}"
            checked += 1
        assert checked > 1, f"{case.golden}: only {checked} feasible config at {env}"
