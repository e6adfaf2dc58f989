"""Template block sizes a launcher picks by shape, and the knobs of the passes after them, build
with nvcc for sm_90 wherever the original builds (slow: one nvcc run, about ten seconds).

The kernels are the goldens of ``tests/golden/block_size/template_heuristic.cu`` (a llama.cpp-like
norm, ``ncols < 1024 ? 32 : 1024``) and ``template_assert.cu`` (a static_assert narrows the
domain). Every value of ``BLOCK_X`` is instantiated, and a few sampled configs of
``expose,block-size,vectorize``; each goes in its own namespace of one translation unit, host
launcher included, so that nvcc instantiates every kernel the launcher calls. A failing unit is
compiled again one instantiation at a time, to name the culprit.
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


def _compile(sources: list[str], where: Path) -> subprocess.CompletedProcess[str]:
    body = "\n".join(f"namespace ktx_s{i} {{\n{s}\n}}  // namespace ktx_s{i}" for i, s in enumerate(sources))
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
