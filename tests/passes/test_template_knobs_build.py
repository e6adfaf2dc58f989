"""Template block sizes a launcher picks by shape, and the knobs of the passes after them, build
with nvcc for sm_90 wherever the original builds (slow: one nvcc run, about ten seconds).

The kernels are the goldens of ``tests/golden/block_size/template_heuristic.cu`` (a llama.cpp-like
norm, ``ncols < 1024 ? 32 : 1024``) and ``template_assert.cu`` (a static_assert narrows the
domain). Every value of ``BLOCK_X`` is instantiated, and a few sampled configs of
``expose,block-size,vectorize``; each goes in its own namespace of one translation unit, host
launcher included, so that nvcc instantiates every kernel the launcher calls. A failing unit is
compiled again one instantiation at a time, to name the culprit.

Also every config of the knobs the spec-bound rules expose (session 9: a vector width a launcher
picks by name, a block x items-per-thread pair held at its product, template arguments that
follow BLOCK_X), on the unit tests' kernels, each instantiated by taking the kernel's address.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from passtest import ROOT

from ktx.pipeline import run

NVCC = shutil.which("nvcc")
GOLDEN = ROOT / "tests" / "golden" / "block_size"
FLAGS = ("-std=c++17", "-arch=sm_90", "-c")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")]


def _units(name: str) -> list[tuple[str, str]]:
    """(label, source) for the original and each instantiation of ``name``'s knobs."""
    path = GOLDEN / name
    text = path.read_text()
    units = [(f"{name} original", text)]
    t = run(text, "block-size", path=str(path))
    (knob,) = t.knobs
    assert knob.name == "BLOCK_X" and len(knob.values) >= 3
    units += [(f"{name} BLOCK_X={v}", t.instantiate({"BLOCK_X": v})) for v in knob.values]
    chain = run(text, "expose,block-size,vectorize", path=str(path))
    seen: list[dict[str, int]] = []
    for seed in range(50):
        config = chain.space.sample(seed)
        if config not in seen:
            seen.append(config)
        if len(seen) == 3:
            break
    units += [(f"{name} {chain.pipeline} {c}", chain.instantiate(c)) for c in seen]
    return units


def _compile(sources: list[str], where: Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    units = (f"namespace ktx_s{i} {{\n{s}\n}}  // namespace ktx_s{i}" for i, s in enumerate(sources))
    body = prelude + "\n".join(units)
    cu = where / "unit.cu"
    cu.write_text(body)
    assert NVCC is not None
    cmd = [NVCC, *FLAGS, str(cu), "-o", str(where / "unit.o")]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_every_template_block_size_and_sampled_chain_config_builds() -> None:
    units = _units("template_heuristic.cu") + _units("template_assert.cu")
    assert all("#include" not in s for _, s in units)  # namespaces may wrap them whole
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        result = _compile([s for _, s in units], where)
        if result.returncode != 0:
            failed = [label for label, s in units if _compile([s], where).returncode != 0]
            pytest.fail(f"nvcc failed for {failed}:\n{result.stderr[-3000:]}")


def _spec_bound_units() -> list[tuple[str, str]]:
    """Every config of the knobs this session's spec-bound rules expose (a vector width the
    launcher picks by name, a block x items pair, template arguments that follow BLOCK_X), each
    instantiated by taking the kernel's address at its name expression (no launcher needed)."""
    from ktx.ir.launch import LaunchMapping
    from test_block_size import ROWS_UNROLLED, SOFTMAX_LIKE
    from test_expose import PICKED_UNROLL, QUANT, TILED, VEC_PICKED

    cases = [
        (VEC_PICKED, "expose{names=VEC_SIZE}", ["8", "float"], None, {}),
        (
            TILED,
            "expose",
            ["float", "512", "64", "8"],
            LaunchMapping(("(n + 511) // 512",), ("64",), "0", (), "spec"),
            {},
        ),
        (
            QUANT,
            "expose",
            ["float", "4096", "4"],
            LaunchMapping(("cdiv(n, 4096)",), ("1024",), "0", (), "spec"),
            {},
        ),
        (
            SOFTMAX_LIKE,
            "block-size",
            ["true", "1024", "1024"],
            LaunchMapping(("rows",), ("1024",), "(ncols + 32) * 4", (("ncols", "1024"),), "spec"),
            {"ncols": 1024},
        ),
        (
            ROWS_UNROLLED,
            "block-size",
            ["float", "{2 * ((elems_per_row + 4095) // 4096)}", "256", "256"],
            LaunchMapping(("rows",), ("block",), "0", (("block", "256"),), "spec"),
            {"elems_per_row": 8192},
        ),
        (
            # issue 22 item 3: an items count the spec picks per shape (0: the pick)
            PICKED_UNROLL,
            "expose",
            ["float", "{(n + 1023) // 1024}"],
            LaunchMapping(("rows",), ("256",), "0", (), "spec"),
            {"n": 2048},
        ),
    ]
    from ktx.spec import expand

    units = []
    for source, pipeline, args, mapping, shape in cases:
        t = run(source, pipeline, template_args=args, mapping=mapping)
        assert t.knobs, pipeline
        grid = [dict(zip([k.name for k in t.knobs], vs, strict=True)) for vs in _product(t)]
        for config in [c for c in grid if t.space.feasible(c, shape or None)]:
            name = expand(t.name_expression(config), {**shape, **config})
            body = t.instantiate(config) + f"\nvoid* ktx_use = (void*)&{name};\n"
            units.append((f"{pipeline} {config}", body))
    return units


def _product(t):  # type: ignore[no-untyped-def]
    import itertools

    return itertools.product(*(k.values for k in t.knobs))


def test_every_config_of_the_spec_bound_template_knobs_builds() -> None:
    units = _spec_bound_units()
    assert len(units) >= 3 + 4 + 3 + 7 + 4 + 4  # COPY_UNROLL: 0 (the pick), 2, 3, 4 at n = 2048
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        # <cstdint> before the namespaces (the kernels name uint32_t); one nvcc run, its errors
        # name the namespace (ktx_s<i>) of the config that failed.
        result = _compile([s for _, s in units], where, prelude="#include <cstdint>\n")
        labels = "\n".join(f"ktx_s{i}: {label}" for i, (label, _) in enumerate(units))
        assert result.returncode == 0, f"{labels}\n{result.stderr[-3000:]}"
