"""The harness's plumbing on a CPU: real compiles, a fake worker, every failure kept as a value."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.commands._measure_common import compiler_notes
from ktx.measure import compile as compiler
from ktx.measure.compile import CompileRequest, compile_kernel, find_nvcc, mangled_name
from ktx.measure.harness import Harness
from ktx.measure.types import Measurement, Resources, Status, original_candidate
from ktx.specload import load_spec


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
@pytest.mark.slow
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


@needs_compiler
def test_precision_configs_can_be_checked_against_python() -> None:
    spec = load_spec(ROOT / "kernels" / "moe_sum")
    assert spec.reference.python and spec.reference.use == "original"
    point = spec.find_point("tokens=64,d=4096,topk=4")
    for precision_python, fast_ref in ((False, "original"), (True, "python")):
        with Harness(spec, handler=FAKE, timeout_s=20, precision_python=precision_python) as h:
            fast = replace(h.original, config={"FAST_MATH": 1}, label="")
            exact = replace(h.original, config={"FAST_MATH": 0, "VEC": 2}, label="")
            assert h.measure(fast, point).message == f"reference={fast_ref}"
            assert h.measure(exact, point).message == "reference=original"
    with Harness(spec, handler=FAKE, timeout_s=20, precision_python=True, reference="original") as h:
        fast = replace(h.original, config={"FAST_MATH": 2}, label="")
        assert h.measure(fast, point).message == "reference=original"  # an explicit choice wins


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


@pytest.mark.skipif(gpu_present(), reason="a GPU is present")
@pytest.mark.parametrize("command", [["bench", "kernels"], ["run", "kernels/silu_and_mul"]])
def test_commands_without_gpu_exit_2(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    os.chdir(ROOT)
    code, err = run_cli(command, capsys)
    assert code == 2 and "no " in err and "GPU" in err


@needs_compiler
def test_run_with_passes_and_config_reaches_the_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ktx run --passes P --config K=V``: the pipeline's candidate is compiled for real and
    measured by the fake worker, and the table says which compiler (and which flags) it used."""
    from ktx.commands import run as run_command

    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(run_command, "Harness", functools.partial(Harness, handler=FAKE))
    out = tmp_path / "run.json"
    kernel = str(ROOT / "kernels" / "silu_and_mul")
    args = ["run", kernel, "--passes", "block-size", "--config", "BLOCK_X=128", "--json", str(out)]
    code = main(args)
    stdout, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out.read_text())
    rows = data["measurements"] if isinstance(data, dict) else data
    configs = [dict(m["config"]) for m in rows]
    assert configs == [{}, {"BLOCK_X": 128}]
    assert rows[1]["label"] == "block-size BLOCK_X=128"
    assert rows[1]["message"] == "reference=original"
    compiler_used = rows[1]["resources"]["compiler"]
    assert compiler_used.startswith(("nvrtc", "nvcc"))
    # silu_and_mul's spec passes --expt-relaxed-constexpr, which NVRTC rejects: either NVRTC
    # dropped it or nvcc took over, and the table is followed by a note saying which.
    assert compiler_used not in ("nvrtc", "nvcc")
    assert "note: 2 of 2 measurements (silu_and_mul) were compiled by" in stdout


@needs_compiler
def test_bench_prints_the_compiler_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ktx.commands import bench as bench_command
    from ktx.measure.protocol import Supervisor

    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(bench_command, "Supervisor", functools.partial(Supervisor, FAKE))
    monkeypatch.setattr(bench_command, "Harness", functools.partial(Harness, handler=FAKE))
    code = main(["bench", str(ROOT / "kernels"), "--kernel", "silu_and_mul", "--shapes", "quick"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert "(silu_and_mul) were compiled by" in stdout


def fake_measurement(compiler: str | None, kernel: str = "k") -> Measurement:
    resources = None if compiler is None else Resources(32, 0, 0, 0, 1024, 256, 8, 1.0, "warps", compiler)
    return Measurement(kernel, "s", {}, Status.OK, resources=resources)


def test_compiler_notes() -> None:
    plain = [fake_measurement("nvrtc"), fake_measurement("nvcc"), fake_measurement(None)]
    assert compiler_notes(plain) == []
    dropped = fake_measurement("nvrtc (dropped --expt-relaxed-constexpr)", "moe_sum")
    fallback = fake_measurement("nvcc (NVRTC rejected an option)", "silu")
    notes = compiler_notes([*plain, dropped, dropped, fallback])
    assert notes == [
        "note: 2 of 6 measurements (moe_sum) were compiled by NVRTC without the spec flags "
        "--expt-relaxed-constexpr, which it rejects (install nvcc to compile with them)",
        "note: 1 of 6 measurements (silu) were compiled by the fallback compiler: "
        "nvcc (NVRTC rejected an option)",
    ]


def test_bad_config_and_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["run", str(ROOT / "kernels" / "silu_and_mul"), "--config", "VEC"], capsys)
    assert code == 2 and "KEY=VALUE" in err
    code, err = run_cli(["run", str(ROOT / "kernels" / "silu_and_mul"), "--shape", "nope"], capsys)
    assert code == 2 and "unknown shape 'nope'" in err
    code, err = run_cli(["bench", str(ROOT / "kernels"), "--shapes", "nope"], capsys)
    assert code == 2 and "no shape set 'nope'" in err
