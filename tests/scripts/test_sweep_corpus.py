"""The corpus sweep (scripts/sweep_corpus.py, scripts/corpus_fetch.py): its kernel finder, its
refusal grouping and its classification, and (slow) the sweep of llm.c that CI runs: no crash
and no file refused whole.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


fetch = _load("corpus_fetch")
sweep = _load("sweep_corpus")


def _llmc() -> Path:
    for cand in (ROOT / "shared" / "llmc", ROOT.parent / "shared" / "llmc"):
        if (cand / "dev" / "cuda").is_dir():
            return cand / "dev" / "cuda"
    pytest.skip("llm.c (shared/llmc) is not here")


# -- finding kernels ----------------------------------------------------------------------------

SOURCE = """
#define MAKE_KERNEL(name) __global__ void name(float* x) { x[0] = 0; }
// __global__ void commented_out(float* x) {}
const char* s = "__global__ void in_a_string(";
template <typename T> __global__ void declared_only(T* x);
__global__ void __launch_bounds__(256) after_void(float* x) { x[0] = 1; }
__launch_bounds__(128, 2) __global__ void before_global(float* x) { x[0] = 2; }
template <int N>
__global__ MY_BOUNDS(N) void behind_macro(float* x) { x[0] = 3; }
template <typename T, int N>
__global__ void
on_its_own_line(T* __restrict__ out,
                const T* in) {
  out[0] = in[0];
}
template __global__ void on_its_own_line<float, 4>(float*, const float*);
__global__ void after_void(int* x) { x[0] = 1; }  // an overload: listed once
"""


def test_find_kernels_lists_definitions_once_in_order() -> None:
    assert fetch.find_kernels(SOURCE) == ["after_void", "before_global", "behind_macro", "on_its_own_line"]


def test_find_kernels_skips_macro_bodies_comments_and_declarations() -> None:
    found = set(fetch.find_kernels(SOURCE))
    assert not found & {"name", "commented_out", "in_a_string", "declared_only"}


def test_selected_applies_patterns_and_exclusions() -> None:
    project = fetch.Project("p", "o/p", "main", ("csrc/*.cu",), ("csrc",), exclude=("*/skip.cu",))
    paths = ["csrc/a.cu", "csrc/skip.cu", "csrc/a.h", "other/b.cu"]
    assert fetch.selected(project, paths) == ["csrc/a.cu"]
    assert fetch.context_paths(project, paths) == ["csrc/a.cu", "csrc/skip.cu", "csrc/a.h"]


def test_manifest_names_main_and_heldout_corpora_of_the_issue_size() -> None:
    data: dict[str, Any] = json.loads((ROOT / "results" / "corpus" / "manifest.json").read_text())
    for split, kernels, projects in (("main", 150, 5), ("heldout", 40, 2)):
        files = [f for f in data["files"] if f["split"] == split]
        assert sum(len(f["kernels"]) for f in files) >= kernels
        assert len({f["project"] for f in files}) >= projects
    main = {f["project"] for f in data["files"] if f["split"] == "main"}
    held = {f["project"] for f in data["files"] if f["split"] == "heldout"}
    assert not main & held
    assert all(len(f["commit"]) == 40 for f in data["files"])


# -- grouping refusals ----------------------------------------------------------------------------


def test_normalise_strips_lines_paths_and_quoted_code() -> None:
    a = sweep.normalise("cannot tell that start `i * 4` and step `n` split it (line 12)", "k1")
    b = sweep.normalise("cannot tell that start `tid` and step `stride` split it (line 340)", "k2")
    assert a == b == "cannot tell that start `…` and step `…` split it (line N)"
    assert sweep.normalise("/x/y/kern.cu:12:3: kernel k1 is odd", "k1") == "<file>: kernel <kernel> is odd"
    assert sweep.normalise("unknown size of element type 'T'") == "unknown size of element type '…'"


def test_focus_pass_is_the_last_pass_without_options() -> None:
    assert sweep.focus_pass("coarsen,vectorize{tie=true}") == "vectorize"


ELEMENTWISE = """
__global__ void scale(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
void launch(float* out, const float* in, int n) {
  const int threads = 256;
  scale<<<(n + threads - 1) / threads, threads>>>(out, in, n);
}
"""


def test_sweep_file_classifies_applied_and_refused(tmp_path: Path) -> None:
    cu = tmp_path / "scale.cu"
    cu.write_text(ELEMENTWISE)
    src = sweep.Source("t", "main", "scale.cu", str(cu), ("scale",))
    job = sweep.Job(src, ("block-size", "warp-reduce"), 60.0, str(tmp_path), False)
    cases = {c.pipeline: c for c in sweep.sweep_file(job)}
    assert cases["block-size"].status == "applied"
    assert "BLOCK_X" in cases["block-size"].knobs
    assert cases["warp-reduce"].status == "refused"
    assert cases["warp-reduce"].reasons


def test_a_file_ktx_cannot_read_is_refused_whole(tmp_path: Path) -> None:
    cu = tmp_path / "latin1.cu"
    cu.write_bytes(b"// caf\xe9\n" + ELEMENTWISE.encode())
    src = sweep.Source("t", "main", "latin1.cu", str(cu), ("scale",))
    [case] = sweep.sweep_file(sweep.Job(src, ("vectorize",), 60.0, str(tmp_path), False))
    assert (case.status, case.file_refused) == ("refused", True)
    assert "UTF-8" in case.raw[0]


def test_a_kernel_ktx_does_not_find_is_refused_not_crashed(tmp_path: Path) -> None:
    cu = tmp_path / "scale.cu"
    cu.write_text(ELEMENTWISE)
    src = sweep.Source("t", "main", "scale.cu", str(cu), ("scale", "missing"))
    cases = {
        c.kernel: c for c in sweep.sweep_file(sweep.Job(src, ("block-size",), 60.0, str(tmp_path), False))
    }
    assert cases["missing"].status == "refused" and cases["missing"].kernel_refused
    assert not cases["scale"].kernel_refused and not cases["missing"].file_refused


def test_a_case_over_its_time_limit_is_reported_not_hung(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import ktx.pipeline

    def slow(*args: object, **kwargs: object) -> None:
        time.sleep(5)

    monkeypatch.setattr(ktx.pipeline, "run", slow)
    cu = tmp_path / "scale.cu"
    cu.write_text(ELEMENTWISE)
    src = sweep.Source("t", "main", "scale.cu", str(cu), ("scale",))
    [case] = sweep.sweep_file(sweep.Job(src, ("vectorize",), 0.2, str(tmp_path), False))
    assert case.status == "crashed"
    assert "timed out" in case.error


# -- the llm.c sweep CI runs ------------------------------------------------------------------------


@pytest.mark.slow
def test_llmc_sweep_has_no_crash_and_no_file_refused_whole(tmp_path: Path) -> None:
    cuda = _llmc()
    out = tmp_path / "llmc"
    code = sweep.main(["--folder", str(cuda), "--no-compile", "--jobs", "1", "--out", str(out)])
    data = json.loads(out.with_suffix(".json").read_text())
    cases = data["cases"]
    assert cases, "the sweep ran no case"
    assert [c for c in cases if c["status"] == "crashed"] == []
    assert [c for c in cases if c["file_refused"]] == []
    assert code == 0
    applied = {c["pipeline"] for c in cases if c["status"] == "applied"}
    assert {"vectorize", "block-size"} <= applied
    assert "| vectorize |" in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_llmc_rewrites_compile_where_the_original_does(tmp_path: Path) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    cuda = _llmc()
    folder = tmp_path / "cuda"  # two elementwise kernels, read in place through links
    folder.mkdir()
    for name in ("gelu_forward.cu", "residual_forward.cu", "common.h"):
        (folder / name).symlink_to(cuda / name)
    out = tmp_path / "llmc"
    argv = ["--folder", str(folder), "--only", "vectorize", "--jobs", "2"]
    sweep.main([*argv, "--cache", str(tmp_path / "cache"), "--out", str(out)])
    cases = json.loads(out.with_suffix(".json").read_text())["cases"]
    compiled = [c for c in cases if c["compile"]]
    assert compiled, "vectorize applied to no llm.c elementwise kernel"
    assert [c for c in compiled if c["compile"] == "failed"] == []
    assert any(c["compile"] == "ok" for c in compiled)
