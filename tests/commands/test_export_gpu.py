"""``ktx export --torch`` on a GPU: build the extension, call it with torch tensors and compare
the dispatched variants against the original kernel (and a float reference).

The run folder comes from replaying the committed H200 recording of ``ktx optimize`` on
silu_and_mul (the CPU part); everything after ``export`` runs on the GPU through torch. On the
GPU host: ``source scripts/gpu_env.sh && python3 -m pytest -q tests/commands/test_export_gpu.py``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from ktx.cli import main

try:
    import torch

    HAVE_TORCH_GPU = bool(torch.cuda.is_available())
except Exception:
    torch = None
    HAVE_TORCH_GPU = False

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not HAVE_TORCH_GPU, reason="needs torch with a CUDA GPU"),
]

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul"
#: (tokens, d, the variant the table picks)
CASES = ((1, 4096, "ktx_v0"), (3, 11008, "ktx_v1"), (5, 14336, "ktx_original"), (7, 512, "ktx_original"))


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("export_gpu")
    rec = SILU / "recorded" / "optimize" / "quick_h200_2026-11-21.json"
    argv = ["optimize", str(SILU), "--backend", f"replay:{rec}", "--shapes", "quick", "--rounds", "4",
            "--trials-per-round", "16", "--seed", "0", "--ncu", "off",
            "--out", str(base / "run")]  # fmt: skip
    assert main(argv) == 0
    assert main(["export", str(base / "run"), "--torch", "-o", str(base / "torch")]) == 0
    sys.path.insert(0, str(base / "torch"))
    try:
        module = importlib.import_module("silu_and_mul_torch")
        module.extension()  # build once (load_inline with ninja, else nvcc + ctypes)
        return module
    finally:
        sys.path.remove(str(base / "torch"))


@pytest.mark.parametrize(("tokens", "d", "variant"), CASES)
def test_dispatched_equals_original(wrapper: Any, tokens: int, d: int, variant: str) -> None:
    assert torch is not None
    gen = torch.Generator(device="cuda").manual_seed(tokens * d)
    inp = torch.randn(tokens, 2 * d, device="cuda", generator=gen).to(torch.bfloat16)
    got = torch.full((tokens, d), float("nan"), device="cuda", dtype=torch.bfloat16)
    want = torch.full((tokens, d), float("nan"), device="cuda", dtype=torch.bfloat16)
    env = wrapper.shape_of(got, inp)
    assert wrapper._choose(env) == variant
    wrapper.silu_and_mul(got, inp)
    wrapper.silu_and_mul(want, inp, variant="ktx_original")
    torch.cuda.synchronize()
    assert torch.equal(got, want), "the dispatched variant differs from the original kernel"
    x, y = inp[:, :d].float(), inp[:, d:].float()
    ref = x / (1 + torch.exp(-x)) * y
    torch.testing.assert_close(got.float(), ref, rtol=1.6e-2, atol=1e-2)


def test_bad_tensors_are_refused(wrapper: Any) -> None:
    assert torch is not None
    inp = torch.zeros(2, 8192, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        wrapper.silu_and_mul(torch.zeros(2, 4096, dtype=torch.bfloat16), inp)
    with pytest.raises(TypeError, match=r"dtype torch\.float32"):
        wrapper.silu_and_mul(torch.zeros(2, 4096, device="cuda"), inp)
    with pytest.raises(ValueError, match="contiguous"):
        wrapper.silu_and_mul(torch.zeros(4096, 2, device="cuda", dtype=torch.bfloat16).t(), inp)
