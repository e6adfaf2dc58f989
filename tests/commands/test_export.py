"""``ktx export RUN_DIR --torch``: the files, the CUDA compiles with nvcc alone, and the Python
wrapper checks tensors, derives shapes, dispatches and launches (torch stubbed on a CPU; the real
build and call is tests/commands/test_export_gpu.py)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ktx.cli import main

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul"


@pytest.fixture
def exported(replayed_optimize: Path) -> Path:
    """An optimize run replayed from the committed H200 recording, exported (its ``torch/``;
    the run is tests/conftest.py's, shared with tests/test_shipped.py)."""
    return replayed_optimize / "torch"


@pytest.mark.slow
def test_files(exported: Path) -> None:
    names = sorted(p.name for p in exported.iterdir())
    assert names == ["README.md", "kernels.cu", "silu_and_mul_torch.py"]
    cu = (exported / "kernels.cu").read_text()
    assert "namespace ktx_original {" in cu and "namespace ktx_v0 {" in cu and "namespace ktx_v1 {" in cu
    assert "#include <torch" not in cu
    assert (
        'extern "C" void launch_ktx_v0(int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by, '
        "int64_t bz, int64_t shared, int64_t stream, int64_t a0, int64_t a1, int64_t a2)"
    ) in cu
    assert "reinterpret_cast<const __nv_bfloat16*>(a1), static_cast<const int>(a2)" in cu or (
        "reinterpret_cast<const __nv_bfloat16*>(a1), static_cast<int>(a2)" in cu
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
@pytest.mark.slow
def test_the_cuda_compiles_with_nvcc_alone(exported: Path, tmp_path: Path) -> None:
    lib = tmp_path / "k.so"
    cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", "-std=c++17", "--expt-relaxed-constexpr",
           str(exported / "kernels.cu"), "-o", str(lib)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    symbols = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    assert all(f" T launch_ktx_{v}\n" in symbols for v in ("original", "v0", "v1"))


class FakeTensor:
    def __init__(self, shape: tuple[int, ...], dtype: str = "bfloat16", contiguous: bool = True) -> None:
        self.shape, self.dtype, self._contiguous = shape, dtype, contiguous
        self.device = types.SimpleNamespace(type="cuda")

    def dim(self) -> int:
        return len(self.shape)

    def is_contiguous(self) -> bool:
        return self._contiguous

    def data_ptr(self) -> int:
        return 4096


@pytest.fixture
def wrapper(exported: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[tuple[str, tuple[Any, ...]]]]:
    class Device:
        def __enter__(self) -> None: ...
        def __exit__(self, *args: object) -> None: ...

    torch = types.ModuleType("torch")
    torch.bfloat16 = "bfloat16"  # type: ignore[attr-defined]
    torch.Tensor = FakeTensor  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        current_stream=lambda device: types.SimpleNamespace(cuda_stream=7), device=lambda device: Device()
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.syspath_prepend(str(exported))
    sys.modules.pop("silu_and_mul_torch", None)
    module = importlib.import_module("silu_and_mul_torch")
    calls: list[tuple[str, tuple[Any, ...]]] = []
    module._EXT = types.SimpleNamespace(
        **{
            f"launch_ktx_{v}": (lambda n: lambda *a: calls.append((n, a)))(v)
            for v in ("original", "v0", "v1")
        }
    )
    return module, calls


@pytest.mark.slow
def test_dispatch_and_launch(wrapper: tuple[Any, list[tuple[str, tuple[Any, ...]]]]) -> None:
    module, calls = wrapper
    module.silu_and_mul(FakeTensor((1, 4096)), FakeTensor((1, 8192)))
    module.silu_and_mul(FakeTensor((3, 11008)), FakeTensor((3, 22016)))
    module.silu_and_mul(FakeTensor((5, 14336)), FakeTensor((5, 28672)))
    module.silu_and_mul(FakeTensor((5, 512)), FakeTensor((5, 1024)))
    assert calls == [
        ("v0", (1, 4, 1, 256, 1, 1, 0, 7, 4096, 4096, 4096)),  # SPLIT=4 at d=4096
        ("v1", (3, 2, 1, 256, 1, 1, 0, 7, 4096, 4096, 11008)),  # SPLIT=2 at d=11008
        ("original", (5, 1, 1, 256, 1, 1, 0, 7, 4096, 4096, 14336)),  # the table keeps the original
        ("original", (5, 1, 1, 64, 1, 1, 0, 7, 4096, 4096, 512)),  # untuned: the original
    ]


@pytest.mark.slow
def test_tensors_are_checked(wrapper: tuple[Any, list[tuple[str, tuple[Any, ...]]]]) -> None:
    module, calls = wrapper
    with pytest.raises(TypeError, match=r"out: dtype float16, expected torch.bfloat16"):
        module.silu_and_mul(FakeTensor((1, 4096), "float16"), FakeTensor((1, 8192)))
    with pytest.raises(ValueError, match=r"out: expected a contiguous tensor"):
        module.silu_and_mul(FakeTensor((1, 4096), contiguous=False), FakeTensor((1, 8192)))
    with pytest.raises(ValueError, match=r"input: shape \(1, 8000\), the spec says \(1, 8192\)"):
        module.silu_and_mul(FakeTensor((1, 4096)), FakeTensor((1, 8000)))
    assert calls == []


def test_export_needs_a_format_and_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path)]) == 2
    assert "say which format" in capsys.readouterr().err
    assert main(["export", str(tmp_path), "--torch"]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_export_works_from_any_folder(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run made before paths were recorded absolute names its spec relative to the folder it
    was started in; export finds it from the run folder's ancestors, wherever it is run from."""
    import json

    project = tmp_path / "project"
    shutil.copytree(SILU, project / "kernels" / "silu_and_mul", ignore=shutil.ignore_patterns("recorded"))
    run = project / ".ktx" / "optimize" / "silu_and_mul"
    shutil.copytree(exported.parent, run, ignore=shutil.ignore_patterns("torch", "report"))
    state = json.loads((run / "optimize.json").read_text())
    assert Path(state["spec"]).is_absolute()  # what new runs record
    state.update(spec="kernels/silu_and_mul/ktx.toml", source="kernels/silu_and_mul/kernel.cu")
    state["source_rel"] = "kernels/silu_and_mul/kernel.cu"
    (run / "optimize.json").write_text(json.dumps(state))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["export", str(run), "--torch", "-o", "out"]) == 0, capsys.readouterr().err
    assert (elsewhere / "out" / "kernels.cu").read_text() == (exported / "kernels.cu").read_text()
    (project / "kernels" / "silu_and_mul" / "ktx.toml").unlink()
    assert main(["export", str(run), "--torch", "-o", "out2"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{run / 'optimize.json'}: cannot find the run's spec (recorded: 'kernels/silu_and_mul/ktx.toml')"
        in err
    )
