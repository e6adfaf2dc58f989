"""The harness's plumbing on a CPU: real compiles, a fake worker, every failure kept as a value."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.measure import compile as compiler
from ktx.measure.compile import CompileRequest, compile_kernel, find_nvcc, mangled_name
from ktx.measure.harness import Harness
from ktx.measure.types import Status, original_candidate
from ktx.spec import load_spec


def gpu_present() -> bool:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:
        return False


ROOT = Path(__file__).resolve().parents[2]
FAKE = str(Path(__file__).with_name("fake_gpu.py")) + ":handle"


def have_compiler() -> bool:
    if find_nvcc():
        return True
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
        return True
    except Exception:
        return False


needs_compiler = pytest.mark.skipif(not have_compiler(), reason="no NVRTC or nvcc here")


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ktx-cache"))


@needs_compiler
@pytest.mark.parametrize("backend", ["nvrtc", "nvcc", "auto"])
def test_compile_suite_kernel(backend: str) -> None:
    if backend == "nvcc" and not find_nvcc():
        pytest.skip("no nvcc")
    if backend == "nvrtc" and importlib.util.find_spec("cupy") is None:
        pytest.skip("NVRTC is reached through CuPy, which is not installed (extra cuda12 or cuda13)")
    spec = load_spec(ROOT / "kernels" / "moe_sum")
    cand = original_candidate(spec)
    req = CompileRequest(
        cand.source, "moe_sum_kernel<__nv_bfloat16, 4>", cand.flags, "90", (str(spec.folder),), backend
    )
    result = compile_kernel(req)
    assert result.ok, result.log
    assert result.lowered_name.startswith("_Z14moe_sum_kernel")
    assert mangled_name(Path(result.cubin_path).read_bytes(), req.name_expression) == result.lowered_name
    if backend == "nvrtc" and not find_nvcc():
        assert "dropped --expt-relaxed-constexpr" in result.compiler
    assert compile_kernel(req).cached


def moe_request(backend: str) -> CompileRequest:
    spec = load_spec(ROOT / "kernels" / "moe_sum")
    cand = original_candidate(spec)
    return CompileRequest(
        cand.source, "moe_sum_kernel<__nv_bfloat16, 4>", cand.flags, "90", (str(spec.folder),), backend
    )


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="NVRTC is reached through CuPy")
def test_nvrtc_records_the_flags_it_dropped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    result = compile_kernel(moe_request("auto"))
    if not result.ok and "NVRTC unavailable" in result.log:
        pytest.skip("CuPy cannot load NVRTC here")
    assert result.ok, result.log
    assert result.dropped_flags == ("--expt-relaxed-constexpr",)
    assert result.compiler == "nvrtc (dropped --expt-relaxed-constexpr)" and not result.fallback
    assert compile_kernel(moe_request("auto")).dropped_flags == result.dropped_flags  # from the cache


@pytest.mark.skipif(not find_nvcc(), reason="no nvcc")
def test_nvcc_fallback_is_recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))

    def rejects(req: CompileRequest, flags: object) -> None:
        raise compiler._NvrtcFailure("NVRTC_ERROR_INVALID_OPTION: unrecognized option -x", True)

    monkeypatch.setattr(compiler, "_nvrtc", rejects)
    result = compile_kernel(moe_request("auto"))
    assert result.ok, result.log
    assert result.compiler == "nvcc (NVRTC rejected an option)"
    assert result.fallback == "NVRTC rejected an option" and result.dropped_flags == ()
    plain = compile_kernel(moe_request("nvcc"))
    assert plain.compiler == "nvcc" and not plain.fallback


@needs_compiler
def test_compile_error_is_a_result() -> None:
    req = CompileRequest("__global__ void k( { }", "k", (), "90")
    result = compile_kernel(req)
    assert not result.ok and "error" in result.log.lower()


@needs_compiler
def test_harness_plumbing_and_failures() -> None:
    spec = load_spec(ROOT / "kernels" / "moe_sum")
    with Harness(spec, handler=FAKE, timeout_s=20) as h:
        assert h.device().cc == "90"
        point = spec.find_point("tokens=64,d=4096,topk=4")
        orig = h.original
        m = h.measure(orig, point)
        assert m.status is Status.OK and m.message == "reference=python"
        assert m.verified == ("moe_sum_kernel<__nv_bfloat16, 4>",)  # odd shapes share the instantiation
        tuned = replace(orig, config={"X": 1}, label="")
        assert h.measure(tuned, point).message == "reference=original"
        broken = replace(orig, source=orig.source + "\n#error planted\n", label="broken")
        assert h.measure(broken, point).status is Status.COMPILE_ERROR
        bad_launch = replace(orig, grid=("tokens / 3",))
        assert h.measure(bad_launch, point).status is Status.LAUNCH_ERROR
        hang = replace(orig, source=orig.source + "\n// KTX_TEST_HANG\n")
        die = replace(orig, source=orig.source + "\n// KTX_TEST_DIE\n")
        h.timeout_s = 3
        results = list(h.measure_many([(hang, point), (die, point), (orig, point)]))
        assert [r.status for r in results] == [Status.TIMEOUT, Status.CRASH, Status.OK]
        assert "exit status 9" in results[1].message
        assert h.supervisor.starts == 3


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


@pytest.mark.skipif(gpu_present(), reason="a GPU is present")
@pytest.mark.parametrize("command", [["bench", "kernels"], ["run", "kernels/silu_and_mul"]])
def test_commands_without_gpu_exit_2(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    os.chdir(ROOT)
    code, err = run_cli(command, capsys)
    assert code == 2 and "no " in err and "GPU" in err


def test_passes_are_not_faked(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["run", str(ROOT / "kernels" / "silu_and_mul"), "--passes", "vectorize"], capsys)
    if "pass pipelines arrive" not in err and "candidate(spec, passes, config)" not in err:
        pytest.skip("the pass framework provides ktx.pipeline.candidate now")
    assert code == 2


def test_bad_config_and_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["run", str(ROOT / "kernels" / "silu_and_mul"), "--config", "VEC"], capsys)
    assert code == 2 and "KEY=VALUE" in err
    code, err = run_cli(["run", str(ROOT / "kernels" / "silu_and_mul"), "--shape", "nope"], capsys)
    assert code == 2 and "unknown shape 'nope'" in err
    code, err = run_cli(["bench", str(ROOT / "kernels"), "--shapes", "nope"], capsys)
    assert code == 2 and "no shape set 'nope'" in err
