"""Every command on a table of bad inputs: exit 2, no traceback, and the offending path (with its
line, where the input has lines) in the message (issue 18, item 7).

The inputs are what a user gets wrong: a missing, empty, binary or non-UTF-8 file, a folder
where a file belongs and the reverse, a spec that is not TOML or names the wrong things, a
kernel with a syntax error, an unknown pass, option or knob value, a damaged run folder, and
outputs into folders that do not exist; and issue 21's (item 4): a shape that is not NAME=INT, a
knob given twice, a CUDA file where a kernel folder belongs, a negative, zero or non-finite
count, time or gain, a run that never finished, an LLM endpoint that never answers. The error
line must come first on stderr. Each row runs ``ktx.cli.main`` in this process: an
exception escaping it is what a user would see as a traceback, so it fails the row. A few rows
also run as a real subprocess, to check the same end to end.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ktx.cli import main

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul"
RECORDING = SILU / "recorded" / "exhaustive_h200_2026-11-21.json"
OPT_RECORDING = SILU / "recorded" / "optimize" / "quick_h200_2026-11-21.json"

SYNTAX_KERNEL = """\
__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    x[i] = x[i] * * 2.f +;
  }
}

void launch(float* x, int n) { scale<<<(n + 255) / 256, 256>>>(x, n); }
"""

HOST_ONLY = "int add(int a, int b) { return a + b; }\n"


def _dead_url() -> str:
    """An endpoint nothing listens on: a port the system just handed out, closed again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


DEAD_URL = _dead_url()
#: ``ktx optimize --planner llm`` at an endpoint that never answers, on one recorded shape.
LLM_DEAD = (
    "optimize", "{w}/silu_and_mul", "--planner", "llm", "--model", "m", "--base-url", DEAD_URL,
    "--backend", "replay:{w}/measurements_only.json", "--ncu", "off", "--shapes", "tokens=1,d=4096",
    "--llm-attempts", "1", "--rounds", "1",
)  # fmt: skip


@dataclass(frozen=True)
class Case:
    """One bad input: the command line (``{w}`` is the world folder) and where the message
    must point: ``where`` (a path under the world) and whether a ``:line`` must follow it."""

    name: str
    argv: tuple[str, ...]
    where: str
    line: bool = False
    contains: str = ""
    #: ``init --check`` answers "not ready" with exit 1 for a spec that loads badly (its
    #: contract: 1 is "edit the spec", 2 is "bad command line").
    code: int = 2
    #: Text the standard output must hold too (a run's summary that says what went wrong).
    summary: str = ""


def _spec_folder(world: Path, name: str, toml: str | bytes | None = None, cu: str | None = None) -> None:
    folder = world / name
    shutil.copytree(SILU, folder, ignore=shutil.ignore_patterns("recorded", "README.md"))
    if isinstance(toml, bytes):
        (folder / "ktx.toml").write_bytes(toml)
    elif toml is not None:
        (folder / "ktx.toml").write_text(toml)
    if cu is not None:
        (folder / "kernel.cu").write_text(cu)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    w = tmp_path_factory.mktemp("bad")
    good = (SILU / "ktx.toml").read_text()
    src = w / "src"
    src.mkdir()
    (src / "empty.cu").write_text("")
    (src / "binary.cu").write_bytes(b"\x7fELF\x00\x01\x02" * 64)
    (src / "latin1.cu").write_bytes(b"// caf\xe9\n__global__ void k(float* x) { x[0] = 1.f; }\n")
    (src / "syntax.cu").write_text(SYNTAX_KERNEL)
    (src / "host.cu").write_text(HOST_ONLY)
    (src / "folder.cu").mkdir()
    (w / "afile").write_text("not a folder\n")

    _spec_folder(w, "silu_and_mul")  # the recordings are of a folder of this name
    # the recorded measurements without the run they came from: an LLM planner cannot follow a
    # rules-planned run's rounds, so its cases search these measurements instead
    recorded = json.loads(OPT_RECORDING.read_text())
    recorded.pop("run", None)
    (w / "measurements_only.json").write_text(json.dumps(recorded))
    (w / "nospec").mkdir()
    shutil.copy(SILU / "kernel.cu", w / "nospec" / "kernel.cu")
    _spec_folder(w, "spec_empty", "")
    _spec_folder(w, "spec_binary", b"\x00\x01\x02\x03kernel")
    latin1 = good.replace("# silu_and_mul", "# caf\udce9", 1).encode("utf-8", "surrogateescape")
    _spec_folder(w, "spec_latin1", latin1)
    unclosed = good.replace('kernel = "silu_and_mul_kernel"', 'kernel = "silu_and_mul_kernel')
    _spec_folder(w, "spec_toml", unclosed)
    _spec_folder(w, "spec_shape5", good.replace('shape = "[tokens, d]"', "shape = 5", 1))
    _spec_folder(w, "spec_nokernel", good.replace('"silu_and_mul_kernel"', '"silu_and_mull_kernel"'))
    _spec_folder(w, "spec_key", good.replace("[launch]", "[launch]\nthreads = 128", 1))
    _spec_folder(w, "spec_source", good.replace('source = "kernel.cu"', 'source = "gone.cu"'))
    _spec_folder(w, "spec_syntax", good.replace("silu_and_mul_kernel", "scale").replace(
        "template_args = [\"__nv_bfloat16\"]\n", ""), SYNTAX_KERNEL)  # fmt: skip
    # A spec that loads with a warning (bf16's max_abs caps atol): bad input stays the first line.
    _spec_folder(w, "spec_warns", good + "\n[tolerance]\nbf16 = { atol = 5 }\n")
    _spec_folder(w, "spec_dir")
    (w / "spec_dir" / "ktx.toml").unlink()
    (w / "spec_dir" / "ktx.toml").mkdir()

    states = {"run_corrupt": "{bad", "run_list": "[1, 2]", "run_nospec": '{"spec": "gone/ktx.toml"}'}
    for name, state in states.items():
        (w / name).mkdir()
        (w / name / "optimize.json").write_text(state)
    (w / "run_latin1").mkdir()
    (w / "run_latin1" / "optimize.json").write_bytes(b'{"kernel": "caf\xe9"}')
    (w / "run_log").mkdir()
    (w / "run_log" / "log.jsonl").write_text('{"event": "start", "request": {"kernel_dir": "x"}}\n{bad\n')
    (w / "run_empty").mkdir()
    (w / "plugin_broken.py").write_text("def f(:\n")
    # Runs killed before their outputs: an optimize run without final/, a tune run without
    # dispatch.json (both name a spec that exists).
    (w / "run_unfinished").mkdir()
    state = {"state": "running", "spec": str(w / "silu_and_mul" / "ktx.toml"), "pipeline": "split"}
    (w / "run_unfinished" / "optimize.json").write_text(json.dumps(state))
    (w / "tune_unfinished").mkdir()
    start = {"event": "start", "request": {"kernel_dir": str(w / "silu_and_mul"), "passes": "split"}}
    (w / "tune_unfinished" / "log.jsonl").write_text(json.dumps(start) + "\n")
    return w


#: Bad source files, for every command that takes one.
SOURCES = (
    ("missing", "src/nothere.cu", False),
    ("empty", "src/empty.cu", True),
    ("binary", "src/binary.cu", True),
    ("not-utf8", "src/latin1.cu", True),
    ("syntax-error", "src/syntax.cu", True),
    ("no-kernel", "src/host.cu", False),
    ("directory", "src/folder.cu", False),
)

#: Bad kernel folders, for every command that takes one (``where``: the file to point at).
SPECS = (
    ("missing-folder", "nothere", "nothere", False),
    ("no-spec", "nospec", "nospec", False),
    ("spec-is-a-folder", "spec_dir", "spec_dir/ktx.toml", False),
    ("empty-spec", "spec_empty", "spec_empty/ktx.toml", False),
    ("binary-spec", "spec_binary", "spec_binary/ktx.toml", False),
    ("not-utf8-spec", "spec_latin1", "spec_latin1/ktx.toml", True),
    ("bad-toml", "spec_toml", "spec_toml/ktx.toml", True),
    ("shape-is-an-integer", "spec_shape5", "spec_shape5/ktx.toml", True),
    ("kernel-not-defined", "spec_nokernel", "spec_nokernel/ktx.toml", True),
    ("unknown-key", "spec_key", "spec_key/ktx.toml", True),
    ("source-missing", "spec_source", "spec_source/ktx.toml", True),
    ("syntax-error-in-kernel", "spec_syntax", "spec_syntax/kernel.cu", True),
)

#: Damaged run folders, for report and export.
RUNS = (
    ("missing-run", "nothere", "nothere", False),
    ("run-is-a-file", "afile", "afile", False),
    ("empty-run", "run_empty", "run_empty", False),
    ("corrupt-state", "run_corrupt", "run_corrupt/optimize.json", True),
    ("state-not-an-object", "run_list", "run_list/optimize.json", False),
    ("not-utf8-state", "run_latin1", "run_latin1/optimize.json", False),
    ("spec-gone", "run_nospec", "run_nospec/optimize.json", False),
)


def _cases() -> list[Case]:
    cases: list[Case] = []
    # The measuring commands stop at the bad input, before any GPU or recording is needed.
    spec_commands = {
        "init": ("init", "--check"),
        "run": ("run",),
        "bench": ("bench",),
        "tune": ("tune", "--backend", f"replay:{RECORDING}", "--quiet"),
        "optimize": ("optimize", "--ncu", "off"),
    }
    for name, path, line in SOURCES:
        cases.append(Case(f"init-{name}", ("init", f"{{w}}/{path}", "--print"), path, line))
        cases.append(Case(f"inspect-{name}", ("inspect", f"{{w}}/{path}"), path, line))
        cases.append(Case(f"apply-{name}", ("apply", "--passes", "block-size", f"{{w}}/{path}"), path, line))
    for name, folder, where, line in SPECS:
        for command, head in spec_commands.items():
            where_here = folder if command == "bench" and name == "missing-folder" else where
            code = 2
            if command == "init" and name in ("missing-folder", "no-spec", "spec-is-a-folder"):
                where_here = folder
            elif command == "init" and name != "not-utf8-spec":
                code = 1
            if command == "bench" and name == "spec-is-a-folder":
                where_here = folder  # a folder without a ktx.toml file is no kernel folder
            cases.append(Case(f"{command}-{name}", (*head, f"{{w}}/{folder}"), where_here, line, code=code))
    for name, folder, where, line in RUNS:
        cases.append(Case(f"report-{name}", ("report", f"{{w}}/{folder}"), where, line))
        cases.append(Case(f"export-{name}", ("export", f"{{w}}/{folder}", "--torch"), where, line))
    cases.append(Case("export-corrupt-log", ("export", "{w}/run_log", "--torch"), "run_log/log.jsonl", True))

    good = "{w}/silu_and_mul"
    kernel = "{w}/silu_and_mul/kernel.cu"
    cases += [
        # Passes, options, knob values.
        Case("apply-unknown-pass", ("apply", "--passes", "nope", kernel), "", contains="unknown pass 'nope'"),
        Case(
            "apply-unknown-pass-option",
            ("apply", "--passes", "block-size{bogus=1}", kernel),
            "",
            contains="no option 'bogus'",
        ),
        Case(
            "apply-knob-out-of-domain",
            ("apply", "--passes", "block-size", "--config", "BLOCK_X=7", kernel),
            "silu_and_mul/kernel.cu",
            contains="BLOCK_X takes",
        ),
        Case(
            "apply-knob-not-an-integer",
            ("apply", "--passes", "block-size", "--config", "BLOCK_X=abc", kernel),
            "",
            contains="'abc' is not an integer",
        ),
        Case(
            "apply-unknown-kernel",
            ("apply", "--passes", "block-size", "--kernel", "zz", kernel),
            "silu_and_mul/kernel.cu",
            contains="no kernel named 'zz'",
        ),
        Case("run-unknown-pass", ("run", good, "--passes", "nope"), "", contains="unknown pass 'nope'"),
        Case("run-config-not-key-value", ("run", good, "--config", "X"), "", contains="'X'"),
        Case("run-config-not-an-integer", ("run", good, "--config", "X=y"), "", contains="integers"),
        Case("run-too-few-rounds", ("run", good, "--rounds", "1"), "", contains="--rounds 3"),
        Case(
            "apply-unknown-knob",
            ("apply", "--passes", "block-size", "--config", "NOPE=1", kernel),
            "silu_and_mul/kernel.cu",
            contains="no knob 'NOPE'",
        ),
        Case(
            "apply-empty-pipeline-element",
            ("apply", "--passes", "block-size,", kernel),
            "",
            contains="empty element",
        ),
        Case(
            "apply-unclosed-option",
            ("apply", "--passes", "tile{sizes=16", kernel),
            "",
            contains="unclosed '{'",
        ),
        Case("optimize-unknown-backend", ("optimize", good, "--backend", "bogus"), "", contains="'bogus'"),
        Case("optimize-recording-not-json", ("optimize", good, "--backend", "replay:{w}/afile"), "afile"),
        Case(
            "optimize-no-rounds",
            ("optimize", good, "--rounds", "0", "--backend", f"replay:{OPT_RECORDING}"),
            "",
            contains="--rounds 0",
        ),
        Case(
            "run-unknown-shape",
            ("run", good, "--shape", "nope=1"),
            "silu_and_mul/ktx.toml",
            contains="nope=1",
        ),
        Case(
            "tune-unknown-pass",
            ("tune", good, "--passes", "nope", "--backend", f"replay:{RECORDING}"),
            "",
            contains="unknown pass 'nope'",
        ),
        Case("tune-no-trials", ("tune", good, "--trials", "0"), "", contains="--trials 0"),
        Case(
            "optimize-unknown-shape-set",
            ("optimize", good, "--shapes", "nope", "--ncu", "off", "--backend", f"replay:{OPT_RECORDING}"),
            "silu_and_mul/ktx.toml",
            contains="'nope'",
        ),
        Case("bench-no-kernel-folders", ("bench", "{w}/src"), "src"),
        Case("passes-missing-plugin", ("passes", "--plugin", "{w}/nothere.py"), "nothere.py"),
        Case("passes-broken-plugin", ("passes", "--plugin", "{w}/plugin_broken.py"), "plugin_broken.py"),
        # Outputs where they cannot go.
        Case(
            "apply-output-into-missing-folder",
            ("apply", "--passes", "block-size", kernel, "-o", "{w}/nodir/x.cu"),
            "nodir/x.cu",
            contains="mkdir -p",
        ),
        Case(
            "apply-trace-into-missing-folder",
            ("apply", "--passes", "block-size", kernel, "--trace", "{w}/nodir/t.json"),
            "nodir/t.json",
            contains="mkdir -p",
        ),
        Case("apply-output-is-a-folder", ("apply", "--passes", "block-size", kernel, "-o", "{w}/src"), "src"),
        Case("init-out-is-a-file", ("init", kernel, "--out", "{w}/afile", "--force"), "afile"),
        Case("run-json-into-missing-folder", ("run", good, "--json", "{w}/nodir/r.json"), "nodir/r.json"),
        Case("bench-json-into-missing-folder", ("bench", good, "--json", "{w}/nodir/r.json"), "nodir/r.json"),
        Case("tune-out-is-a-file", ("tune", good, "--out", "{w}/afile"), "afile"),
        Case("optimize-out-is-a-file", ("optimize", good, "--out", "{w}/afile", "--ncu", "off"), "afile"),
        Case(
            "optimize-out-under-a-file", ("optimize", good, "--out", "{w}/afile/run", "--ncu", "off"), "afile"
        ),
        Case("report-out-is-a-file", ("report", "{w}/run_corrupt", "--out", "{w}/afile"), "afile"),
        Case("export-out-is-a-file", ("export", "{w}/run_corrupt", "--torch", "-o", "{w}/afile"), "afile"),
        Case("export-no-format", ("export", "{w}/run_corrupt"), "", contains="--torch"),
    ]
    cases += _issue21_cases(good, kernel)
    # An unknown option, for every command (argparse's usage error, exit 2).
    positional = {
        "init": kernel,
        "inspect": kernel,
        "apply": kernel,
        "passes": None,
        "run": good,
        "bench": good,
        "tune": good,
        "optimize": good,
        "report": "{w}/run_corrupt",
        "export": "{w}/run_corrupt",
    }
    for command, arg in positional.items():
        argv = (command, "--no-such-option") if arg is None else (command, arg, "--no-such-option")
        if command == "apply":
            argv = (*argv, "--passes", "block-size")
        cases.append(Case(f"{command}-unknown-option", argv, "", contains="--no-such-option"))
    return cases


def _issue21_cases(good: str, kernel: str) -> list[Case]:
    """The cases issue 21 found still misbehaving (a traceback, exit 0 on bad input, a
    misleading message), and the numeric options checked with them."""
    replay = ("--backend", f"replay:{RECORDING}", "--quiet")
    opt_replay = ("--backend", f"replay:{OPT_RECORDING}", "--ncu", "off")
    cases = [
        # A shape that is not NAME=INT,... (was a ValueError traceback).
        Case(
            "tune-shape-not-an-integer",
            ("tune", good, *replay, "--shapes", "tokens=abc,d=4096"),
            "",
            contains="tokens='abc' is not an integer",
        ),
        Case(
            "tune-shape-not-key-value",
            ("tune", good, *replay, "--shapes", "tokens,d=4096"),
            "",
            contains="'tokens' is not NAME=VALUE",
        ),
        Case(
            "tune-shape-key-twice",
            ("tune", good, *replay, "--shapes", "d=1,d=4096"),
            "",
            contains="d is given twice",
        ),
        Case(
            "tune-shape-negative",
            ("tune", good, *replay, "--shapes", "tokens=-1,d=4096"),
            "",
            contains="tokens=-1 is negative",
        ),
        Case("run-shape-not-an-integer", ("run", good, "--shape", "tokens=1,d=x"), "", contains="d='x'"),
        Case(
            "optimize-shape-not-an-integer",
            ("optimize", good, *opt_replay, "--shapes", "tokens=1.5,d=4096"),
            "",
            contains="tokens='1.5' is not an integer",
        ),
        # After a spec that warns, the error line still comes first (the warning after it or never).
        Case(
            "run-shape-after-a-warning", ("run", "{w}/spec_warns", "--shape", "tokens=x"), "", contains="'x'"
        ),
        Case(
            "bench-config-after-a-warning",
            ("bench", "{w}/spec_warns", "--config", "SPLIT"),
            "",
            contains="expected KEY=VALUE",
        ),
        Case(
            "tune-shape-after-a-warning",
            ("tune", "{w}/spec_warns", *replay, "--shapes", "tokens=x"),
            "",
            contains="'x'",
        ),
        Case(
            "optimize-shape-after-a-warning",
            ("optimize", "{w}/spec_warns", *opt_replay, "--shapes", "tokens=x"),
            "",
            contains="'x'",
        ),
        # A knob given twice (the last one silently won).
        Case(
            "apply-config-twice",
            ("apply", "--passes", "block-size", "--config", "BLOCK_X=128", "--config", "BLOCK_X=256", kernel),
            "",
            contains="BLOCK_X is given twice (BLOCK_X=128 and BLOCK_X=256)",
        ),
        Case(
            "apply-config-twice-in-one-item",
            ("apply", "--passes", "block-size", "--config", "BLOCK_X=64,BLOCK_X=64", kernel),
            "",
            contains="BLOCK_X is given twice",
        ),
        Case(
            "run-config-twice",
            ("run", good, "--passes", "split", "--config", "SPLIT=2", "--config", "SPLIT=4"),
            "",
            contains="SPLIT is given twice",
        ),
        Case(
            "bench-config-twice",
            ("bench", good, "--config", "SPLIT=2", "--config", "SPLIT=2"),
            "",
            contains="SPLIT is given twice",
        ),
        # A CUDA file where a kernel folder belongs (was "invalid TOML" in the .cu).
        Case(
            "tune-cuda-file",
            ("tune", kernel, *replay),
            "silu_and_mul/kernel.cu",
            contains=f"give its kernel folder, {good},",
        ),
        Case(
            "tune-cuda-file-without-spec",
            ("tune", "{w}/src/syntax.cu", *replay),
            "src/syntax.cu",
            contains="ktx init {w}/src/syntax.cu",
        ),
        Case("run-cuda-file", ("run", kernel), "silu_and_mul/kernel.cu", contains="not a kernel folder"),
        Case(
            "optimize-cuda-file",
            ("optimize", kernel, *opt_replay),
            "silu_and_mul/kernel.cu",
            contains="not a kernel folder",
        ),
        Case(
            "tune-other-file",
            ("tune", "{w}/afile", *replay),
            "afile",
            contains="not a kernel folder or a ktx.toml",
        ),
        Case(
            "init-check-cuda-file",
            ("init", "--check", kernel),
            "silu_and_mul/kernel.cu",
            contains=f"ktx init {kernel}",
        ),
        Case("init-check-other-file", ("init", "--check", "{w}/afile"), "afile", contains="or its ktx.toml"),
        # A run that never finished (exported only the original, with no word).
        Case(
            "export-optimize-unfinished",
            ("export", "{w}/run_unfinished", "--torch"),
            "run_unfinished",
            contains="no final/ folder",
        ),
        Case(
            "export-tune-unfinished",
            ("export", "{w}/tune_unfinished", "--torch"),
            "tune_unfinished",
            contains="no dispatch.json",
        ),
        Case(
            "optimize-llm-fallback-without-llm",
            ("optimize", good, *opt_replay, "--llm-fallback"),
            "",
            contains="--llm-fallback is for --planner llm",
        ),
        # A requested LLM planner that never got an answer (was a quiet rules run, exit 0).
        Case(
            "optimize-llm-dead-endpoint",
            (*LLM_DEAD, "--out", "{w}/llm_dead"),
            "",
            contains=f"--planner llm: round 1: no answer from model 'm' at {DEAD_URL}",
            summary="note: round 1: the LLM never answered, so the run stopped",
        ),
    ]
    # Numbers outside their meaning (exit 0 with changed decisions or an empty result).
    numbers = {
        "tune": (
            ("--min-gain", "-1", "--min-gain -1: must be 0 or more"),
            ("--time-limit", "-1", "--time-limit -1: must be more than 0"),
            ("--time-limit", "0", "--time-limit 0: must be more than 0"),
            ("--time-limit", "nan", "--time-limit nan: not a finite number"),
            ("--min-gain", "inf", "--min-gain inf: not a finite number"),
            ("--trials", "-5", "--trials -5"),
            ("--workers", "0", "--workers 0: must be 1 or more"),
            ("--jobs", "-1", "--jobs -1: must be 1 or more"),
            ("--warm-start", "-1", "--warm-start -1: must be 0 or more"),
            ("--min-occupancy", "1.5", "--min-occupancy 1.5: must be 1 or less"),
            ("--min-occupancy", "-0.1", "--min-occupancy -0.1: must be 0 or more"),
            ("--max-spills", "-8", "--max-spills -8: must be 0 or more"),
            ("--seed", "-1", "--seed -1: must be 0 or more"),
        ),
        "optimize": (
            ("--min-gain", "-0.5", "--min-gain -0.5: must be 0 or more"),
            ("--budget", "-1", "--budget -1: must be more than 0"),
            ("--budget", "0", "--budget 0: must be more than 0"),
            ("--budget", "nan", "--budget nan: not a finite number"),
            ("--llm-timeout", "0", "--llm-timeout 0: must be more than 0"),
            ("--seed", "-2", "--seed -2: must be 0 or more"),
            ("--rounds", "-1", "--rounds -1"),
            ("--trials-per-round", "0", "--trials-per-round 0"),
            ("--patience", "0", "--patience 0"),
            ("--llm-attempts", "0", "--llm-attempts 0"),
        ),
        "run": (("--timeout", "0", "--timeout 0: must be more than 0"), ("--rounds", "-3", "--rounds -3")),
        "bench": (("--timeout", "-1", "--timeout -1: must be more than 0"), ("--rounds", "0", "--rounds 0")),
        "apply": (("--sample", "-1", "--sample -1"),),
    }
    heads = {
        "tune": ("tune", good, *replay),
        "optimize": ("optimize", good, *opt_replay),
        "run": ("run", good),
        "bench": ("bench", good),
        "apply": ("apply", "--passes", "block-size", kernel),
    }
    for command, rows in numbers.items():
        for option, value, text in rows:
            name = f"{command}{option}-{value}".replace("--", "-")
            cases.append(Case(name, (*heads[command], option, value), "", contains=text))
    return cases


CASES = _cases()


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``ktx ARGV`` in this process: (exit status, stdout + stderr). An exception escaping
    ``main`` is the traceback a user would see, so it is not caught here."""
    code, out, err = run_main_split(argv, capsys)
    return code, out + err


def run_main_split(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``ktx ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_and_exit_2(
    case: Case, world: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(world)
    monkeypatch.setenv("KTX_CACHE_DIR", str(world / "cache"))
    argv = [a.replace("{w}", str(world)) for a in case.argv]
    code, out, err = run_main_split(argv, capsys)
    text = out + err
    assert code == case.code, text
    assert "Traceback" not in text
    if case.code == 1:  # ktx init --check: each problem on a line, then "not ready"
        assert "not ready" in text, text
        errors = [line for line in text.splitlines() if ": blocks a run: " in line]
    else:  # ours, or argparse's usage error (``ktx COMMAND: error:``)
        lines = (*out.splitlines(), *err.splitlines())
        errors = [line for line in lines if re.match(r"ktx( \w+)?: error:", line)]
        # The error line first on stderr, no remark or warning above it (argparse's usage
        # lines are the exception it makes for itself).
        ours = [line for line in err.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
        assert errors and ours and ours[0] == errors[0], err
    assert len(errors) == 1, text
    error = errors[0]
    if case.where:
        path = re.escape(str(world / case.where))
        pattern = rf"{path}:\d+" if case.line else path
        want = f"{case.where}{':LINE' if case.line else ''}"
        assert re.search(pattern, error), f"{error!r} does not point at {want}"
    if case.contains:
        assert case.contains.replace("{w}", str(world)) in error, error
    assert case.summary in out, out


def test_llm_fallback_is_asked_for_and_said(
    world: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``--llm-fallback`` a dead endpoint is a rules run that says so on the console (the
    first line) and in the summary, not only in the table's planner column; exit 0."""
    monkeypatch.chdir(world)
    monkeypatch.setenv("KTX_CACHE_DIR", str(world / "cache"))
    argv = [a.replace("{w}", str(world)) for a in LLM_DEAD]
    extra = ["--out", str(world / "llm_fallback"), "--llm-fallback", "--trials-per-round", "4"]
    code, out, err = run_main_split([*argv, *extra], capsys)
    assert code == 0, out + err
    first = err.strip().splitlines()[0]
    assert first.startswith("ktx optimize: warning: --planner llm: no answer in round(s) 1;"), err
    assert "the rules planned them (--llm-fallback)" in first and DEAD_URL in first
    assert "| 1 | rules (fallback) |" in out
    assert f"note: round 1: planned by rules (fallback): no answer from model 'm' at {DEAD_URL}" in out


def test_init_check_takes_the_spec_file(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ktx init --check DIR/ktx.toml`` reviews DIR, as ``ktx init --check DIR`` does."""
    folder = world / "silu_and_mul"
    code_dir, by_dir = run_main(["init", "--check", str(folder)], capsys)
    code_file, by_file = run_main(["init", "--check", str(folder / "ktx.toml")], capsys)
    assert code_file == code_dir == 0 and by_file == by_dir
    assert "the spec loads" in by_file and "ktx: error" not in by_file


# One real process in the default run: the entry point's handling is the same for every command
# (each of these cases also runs in-process above); the other two, 2-3 s of CPU each for a Python
# start and ktx's import, run with the slow tests.
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["init", "--check", "{w}/spec_latin1"], id="init-check-not-utf8", marks=SLOW),
        pytest.param(["apply", "--passes", "block-size", "{w}/src/syntax.cu"], id="apply-syntax-error"),
        pytest.param(["export", "{w}/run_corrupt", "--torch"], id="export-corrupt", marks=SLOW),
    ],
)
def test_a_real_process_prints_no_traceback(argv: list[str], world: Path) -> None:
    args = [a.replace("{w}", str(world)) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "ktx", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ktx: error: ") and str(world) in lines[0], proc.stderr


def test_debug_shows_the_traceback(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--debug`` is the way to the traceback; the one line still ends the output."""
    code, text = run_main(["init", "--check", str(world / "spec_latin1"), "--debug"], capsys)
    assert code == 2 and "Traceback" in text and "not UTF-8" in text
