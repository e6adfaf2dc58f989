"""The real-code benchmark (benchmarks/realcode): the edit measure, the manifest's promises
(40+ kernels, 6+ projects, a third held out, a reason for every block), the finished specs'
shape (no placeholder left, the recorded edit leads from a draft to the spec), run.py's
plumbing with a stand-in ktx, and, as a slow test, the CPU part on the fetched sources: drafts,
``ktx init --check`` and the nvcc builds."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "realcode"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"realcode_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"realcode_{name}"] = module
    spec.loader.exec_module(module)
    return module


editstat = _load("editstat")
run = _load("run")
MANIFEST = json.loads((BENCH / "manifest.json").read_text())


# -- the edit measure ---------------------------------------------------------------------------

DRAFT = """a = 1
# TODO: what b is
b = "TODO"
c = 3
d = 4
# note: e from the launcher
e = 5
f = 6
g = 7
h = 8
"""


def test_a_placeholder_replaced_is_an_edit_and_not_silent() -> None:
    final = DRAFT.replace('b = "TODO"', "b = 2")
    s = editstat.stat(editstat.unified(DRAFT, final, "draft"))
    assert (s.edited, s.silent) == (1, 0)


def test_an_unflagged_line_changed_is_silently_wrong() -> None:
    final = DRAFT.replace("d = 4", "d = 5").replace('b = "TODO"', "b = 2")
    s = editstat.stat(editstat.unified(DRAFT, final, "draft"))
    assert (s.edited, s.silent, s.silent_lines) == (2, 1, ("d = 4",))


def test_comments_added_or_removed_are_not_edits() -> None:
    final = DRAFT.replace("# TODO: what b is\n", "").replace("g = 7", "# why g\ng = 7")
    s = editstat.stat(editstat.unified(DRAFT, final, "draft"))
    assert (s.edited, s.silent) == (0, 0)


def test_a_line_replaced_by_two_counts_two_and_a_line_deleted_one() -> None:
    final = DRAFT.replace("c = 3", "c = 4\ncc = 5").replace("h = 8\n", "")
    s = editstat.stat(editstat.unified(DRAFT, final, "draft"))
    assert (s.edited, s.silent) == (3, 2)


def test_unapply_gives_back_the_draft() -> None:
    final = DRAFT.replace("d = 4", "d = 5").replace("a = 1", "a = 0\nz = 9") + "tail = 1\n"
    assert editstat.unapply(final, editstat.unified(DRAFT, final, "draft")) == DRAFT


SPEC = """kernel = "k"
template_args = ["TODO"]

[vars]
B = "256"

[[args]]
name = "x"
dtype = "TODO"
shape = "[TODO]"
role = "in"

[shapes]
default = [{ n = 64 }]

[launch]
grid = ["n"]
block = ["B"]

[compile]
flags = ["-std=c++17"]
"""


def test_edit_classes_name_what_each_edited_line_says_and_sum_to_the_edits() -> None:
    final = (
        SPEC.replace('["TODO"]', '["float"]')
        .replace('B = "256"', 'B = "128"')
        .replace('dtype = "TODO"', 'dtype = "fp32"')
        .replace('shape = "[TODO]"', 'shape = "[n]"\ndist = "int:0..n"')
        .replace("{ n = 64 }", "{ n = 4096 }")
        .replace('block = ["B"]', 'block = ["B"]\nshared = "4"')
        .replace('flags = ["-std=c++17"]', 'flags = ["-std=c++17", "-DX"]')
    )
    diff = editstat.unified(SPEC, final, "draft")
    got = editstat.edit_classes(diff, SPEC, final)
    assert dict(got) == {
        "template_args": 1, "vars": 1, "dtype": 1, "shape": 1, "dist": 1,
        "shape points": 1, "launch": 1, "flags": 1,
    }  # fmt: skip
    assert sum(got.values()) == editstat.stat(diff).edited


# -- the manifest and the specs -----------------------------------------------------------------


def test_the_manifest_keeps_the_issues_promises() -> None:
    kernels = MANIFEST["kernels"]
    assert len(kernels) >= 40
    assert len({k["project"] for k in kernels}) >= 6
    held = [k for k in kernels if k["split"] == "heldout"]
    assert len(held) * 3 >= len(kernels)
    assert len({k["id"] for k in kernels}) == len(kernels)
    for k in kernels:
        assert k["id"] == f"{k['project']}__{k['kernel']}"
        assert k["split"] == MANIFEST["projects"][k["project"]]["split"]
        assert len(MANIFEST["projects"][k["project"]]["commit"]) == 40
        assert k["kind"] and k["file"]
        assert "blocked" not in k or len(k["blocked"]) > 20  # a reason, not a word


def test_every_recorded_edit_leads_from_a_draft_to_a_finished_spec() -> None:
    drafts = _load("drafts")
    finished = 0
    for k in MANIFEST["kernels"]:
        folder = BENCH / k["id"]
        if not (folder / "init.diff").exists():
            continue
        finished += 1
        spec = (folder / "ktx.toml").read_text()
        assert not drafts.placeholders(spec), k["id"]
        diff = (folder / "init.diff").read_text()
        assert diff == "" or diff.startswith("--- draft (ktx init at "), k["id"]
        draft = editstat.unapply(spec, diff)
        assert draft.startswith("# Drafted by `ktx init"), k["id"]
        # a kernel in a namespace is drafted qualified (kernel = "flashinfer::norm::RMSNormKernel")
        named = re.search(r'(?m)^kernel = "(?:[\w:]+::)?(\w+)"', draft)
        assert named is not None and named.group(1) == k["kernel"], k["id"]
        # a draft with placeholders needed an edit
        assert diff or not drafts.placeholders(draft), k["id"]
    assert finished >= 20


# -- run.py with a stand-in ktx ----------------------------------------------------------------

STAND_IN = r"""
import json, sys
from pathlib import Path
cmd = sys.argv[1]
if cmd == "bench":
    Path(sys.argv[sys.argv.index("--json") + 1]).write_text("{}")
    sys.exit(0)
out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
shapes = [
    {"shape": "n=1", "speedup": 1.25, "wins": True,
     "paired": {"status": "measured", "interval": {"estimate": 1.25, "lo": 1.2, "hi": 1.3, "n": 9}}},
    {"shape": "n=2", "speedup": 1.0, "wins": False, "paired": {"status": "not re-measured"}},
]
(out / "optimize.json").write_text(json.dumps({"shapes": shapes, "pipeline": "block-size,unroll"}))
"""


def test_run_kernel_reads_optimize_and_the_table_reports_both_splits(tmp_path: Path) -> None:
    fake = tmp_path / "fake_ktx.py"
    fake.write_text(STAND_IN)
    by_id = {k["id"]: k for k in MANIFEST["kernels"]}
    ran = run.run_kernel(by_id["cuda-samples__vectorAdd"], "0", [sys.executable, str(fake)], tmp_path, 10)
    assert ran.status == "ran" and ran.pipeline == "block-size,unroll"
    assert ran.speedup == pytest.approx((1.25 * 1.0) ** 0.5)
    assert ran.interval.startswith("1.250 [1.200, 1.300]") and ran.wins == 1 and ran.shapes == 2
    # no kernel of the manifest is blocked today (session 9): a row that is, as run.py reads it
    blocked_kernel = {**by_id["cuda-samples__vectorAdd"], "blocked": "a reason ktx cannot take it today"}
    blocked = run.run_kernel(blocked_kernel, "0", [sys.executable, str(fake)], tmp_path, 10)
    assert blocked.status.startswith("blocked: ") and blocked.speedup is None
    text = run.table([ran, blocked], ["# t", ""])
    assert "### main:" in text and "### heldout:" in text
    assert "| vectorAdd | cuda-samples | heldout | ran |" in text


def test_a_failing_bench_is_a_failed_row_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "fake_ktx.py"
    fake.write_text("import sys\nprint('harness: no GPU')\nsys.exit(3)\n")
    k = next(k for k in MANIFEST["kernels"] if k["id"] == "cuda-samples__vectorAdd")
    r = run.run_kernel(k, "0", [sys.executable, str(fake)], tmp_path, 10)
    assert r.status.startswith("failed: ktx bench rc=3") and "no GPU" in r.status


# -- the CPU part on the sources (slow: drafts of large files and nvcc) ---------------------------


@pytest.mark.slow
def test_cpu_check_on_the_fetched_sources(tmp_path: Path) -> None:
    fetch = _load("fetch")
    if not fetch.SRC.is_dir():
        pytest.skip("no sources: run benchmarks/realcode/fetch.py (mirrors or network) first")
    cpu = _load("cpu_check")
    ids = ["cuda-samples__vectorAdd", "exllamav2__quantize_kernel", "bitsandbytes__kQuantizeBlockwise"]
    assert cpu.main(["--ids", *ids, "--out", str(tmp_path), "--cache", str(tmp_path / "cache")]) == 0
    rows = {r["id"]: r for r in json.loads((tmp_path / "cpu_table.json").read_text())}
    assert rows["cuda-samples__vectorAdd"]["init"] == "0 TODOs"
    assert rows["exllamav2__quantize_kernel"]["state"] == "spec"
    assert rows["exllamav2__quantize_kernel"]["check"].startswith("ready")
    for kid in ids[:2]:
        assert rows[kid]["ktx_build"] == "ok" and rows[kid]["build"] == "ok", rows[kid]
    # launched from ops.cu beside kernels.cu (session 8's reach): drafted, no longer refused
    assert rows["bitsandbytes__kQuantizeBlockwise"]["init"].endswith(" TODOs")
    # one sample per pass builds: exllamav2's quantizer takes block-size and coarsen, and has no
    # loop for unroll to expose
    got = cpu.samples(BENCH / "exllamav2__quantize_kernel", ("block-size", "coarsen", "unroll"))
    assert got == {"block-size": "ok", "coarsen": "ok", "unroll": "no knob"}
