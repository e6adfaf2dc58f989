"""``ktx tune`` end to end on the replay backend (a SYNTHETIC recording): outputs, resume, errors."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import optuna
import pytest

from ktx.cli import main
from ktx.search.dispatch import DispatchTable
from ktx.search.runlog import read_log
from ktx.spec import ShapePoint

from .conftest import SILU, TUNED_ARG


def tune(
    capsys: pytest.CaptureFixture[str], recording_path: Path, out: Path, *extra: str
) -> tuple[int, str, str]:
    argv = ["tune", str(SILU), "--backend", f"replay:{recording_path}", "--shapes", TUNED_ARG]
    code = main([*argv, "--out", str(out), "--trials", "25", "--seed", "5", "--quiet", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def measures(out: Path) -> list[dict[str, object]]:
    return [e for e in read_log(out / "log.jsonl") if e["event"] == "measure"]


@pytest.mark.slow
def test_outputs(tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code, stdout, _ = tune(capsys, recording_path, out)
    assert code == 0
    assert "SYNTHETIC" in stdout and "| tokens=1,d=4096 | graph |" in stdout
    for name in (
        "best.json",
        "summary.json",
        "summary.md",
        "dispatch.json",
        "dispatch.h",
        "log.jsonl",
        "study.jsonl",
    ):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["shape"]: r for r in summary["shapes"]}
    assert set(rows) == set(TUNED_ARG.split(";"))
    for row in rows.values():
        assert row["evaluations"] == 25 and row["trials"] >= 25
        assert row["best_us"] and row["original_us"] and row["sampler"] == "model"  # auto: the cost model
        assert row["best_graph_us"] and row["best_single_us"], "both times recorded for the best"
    assert summary["geomean_speedup"] > 1.0
    assert summary["dispatched_geomean_speedup"] >= 1.0 and all(r["noise"] >= 0 for r in rows.values())
    assert "Search geomean (best found / original)" in stdout and "Dispatched geomean" in stdout
    table = DispatchTable.from_dict(json.loads((out / "dispatch.json").read_text()))
    for row in rows.values():
        chosen = table.select(ShapePoint.from_name(row["shape"]).as_dict())
        if chosen is None:
            continue
        assert chosen == row["best_config"] and row["best_us"] < row["original_us"]
    header = (out / "dispatch.h").read_text()
    assert "ktx_dispatch_silu_and_mul(int64_t tokens, int64_t d)" in header
    assert set(table.constraints) == {"d % (VEC * SPLIT) == 0", "BLOCK * VEC * SPLIT <= 2 * d"}
    assert not table.variants or "ktx_silu_and_mul_guard_0(tokens, d)" in header, "guards in the header"
    for i in range(len(table.variants)):
        assert (out / "best" / f"variant_{i}.cu").is_file()
    held = {h["shape"] for h in summary["holdout"]}
    assert held == {"tokens=4,d=4096", "tokens=64,d=4096"}, "midpoints between tuned token counts"
    assert all(h["speedup"] is not None for h in summary["holdout"])
    assert "Held-out shapes" in (out / "summary.md").read_text()
    events = {e["event"] for e in read_log(out / "log.jsonl")}
    assert {"start", "measure", "shape_done", "holdout", "finished"} <= events


@pytest.mark.slow
def test_second_run_measures_nothing_again(
    tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    two = ("--shapes", "tokens=1,d=4096;tokens=256,d=4096")
    assert tune(capsys, recording_path, out, *two)[0] == 0
    first = len(measures(out))
    assert tune(capsys, recording_path, out, *two)[0] == 0
    assert len(measures(out)) == first
    # a larger budget continues the same studies
    assert tune(capsys, recording_path, out, *two, "--trials", "30")[0] == 0
    keys = [e["key"] for e in measures(out)]
    assert len(keys) == len(set(keys)) >= first + 2 * 5
    summary = json.loads((out / "summary.json").read_text())
    assert [r["evaluations"] for r in summary["shapes"]] == [30] * 2


def test_joint(tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "joint"
    code, _, _ = tune(capsys, recording_path, out, "--joint", "--holdout", "none")
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    configs = {json.dumps(r["best_config"], sort_keys=True) for r in summary["shapes"]}
    assert len(configs) == 1, "one config for every shape"
    assert summary["holdout"] == []


@pytest.mark.slow
def test_workers_share_one_sqlite_study(
    tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "workers"
    code, _, _ = tune(capsys, recording_path, out, "--workers", "2", "--shapes", "tokens=1,d=4096")
    assert code == 0
    workers = {str(e["worker"]).split(":")[0] for e in measures(out)}
    assert {"worker0", "worker1"} <= workers | {"main"}
    storage = f"sqlite:///{out / 'study.db'}"
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    study = optuna.load_study(study_name=names[0], storage=storage)
    evaluated = {t.user_attrs["ktx"]["key"] for t in study.trials if t.user_attrs.get("ktx", {}).get("key")}
    assert 25 <= len(evaluated) <= 26  # the budget is shared; one worker may finish one in flight


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--backend", "replay:/nonexistent.json"), "cannot read recording"),
        (("--backend", "tpu"), "unknown backend 'tpu'"),
        (("--trials", "0"), "--trials 0"),
        (("--shapes", "nosuchset"), "unknown shape 'nosuchset'"),
        (("--storage", "nosuchdb://x"), "cannot open storage"),
        (("--workers", "2", "--storage", "journal:/nonexistent/s.jsonl"), "a journal file has one writer"),
    ],
)
def test_user_errors_are_one_line_exit_2(
    tmp_path: Path,
    recording_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, ...],
    message: str,
) -> None:
    code, _, err = tune(capsys, recording_path, tmp_path / "bad", *extra)
    assert code == 2
    assert err.startswith("ktx: error:") and message in err and err.count("\n") == 1


def test_recording_of_another_kernel_is_refused(
    tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "tune",
            str(SILU.parent / "rmsnorm"),
            "--backend",
            f"replay:{recording_path}",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2 and "not 'rmsnorm'" in capsys.readouterr().err


def test_one_main_process_per_run_folder(
    tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "locked"
    out.mkdir()
    with (out / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        code, _, err = tune(capsys, recording_path, out)
    assert code == 2 and "another ktx tune is running" in err


def test_another_backend_gets_its_own_studies(
    tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two recordings of different devices tuned into one folder: the second must not reuse the
    first one's stored original (nor its trials)."""
    data = json.loads(recording_path.read_text())
    for m in data["measurements"]:
        for name in ("single", "graph"):
            if m.get(name):
                m[name] = {k: (v * 3 if k != "n" else v) for k, v in m[name].items()}
    data["device"] = "a slower device"
    other = tmp_path / "slower.json"
    other.write_text(json.dumps(data))
    out = tmp_path / "run"
    # --passes: the knob space (and so the space tag) is the template's, the same for both runs;
    # the recordings answer for the original only (the template's configs come back as crashes).
    one = ("--shapes", "tokens=1,d=4096", "--holdout", "none", "--trials", "3", "--passes", "block-size")
    assert tune(capsys, recording_path, out, *one)[0] == 0
    first = json.loads((out / "summary.json").read_text())["shapes"][0]
    assert tune(capsys, other, out, *one)[0] == 0
    second = json.loads((out / "summary.json").read_text())
    row = second["shapes"][0]
    assert row["original_us"] == pytest.approx(3 * first["original_us"]), "not the other device's original"
    assert row["study"] != first["study"]
    assert second["device"] == "a slower device"


def test_a_needle_is_re_measured_and_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: at a narrow optimum the tune re-measures its few best configs rather than search
    longer, logs both measurements, chooses by them and says so in the summary's note. Here the
    synthetic space's best config is made 30% faster than anything else (a needle) and the grid
    visits every config, so the tune must find it and its neighbours."""
    from ktx.search import synthetic
    from ktx.search.recording import write

    data = synthetic.recording([(16, 4096)], kernel="silu_and_mul")
    tuned = [m for m in data["measurements"] if m["config"] and m["status"] == "ok" and m["graph"]]
    best = min(tuned, key=lambda m: m["graph"]["median_us"])
    for mode in ("graph", "single"):
        for field in ("median_us", "p10_us", "p90_us", "min_us", "max_us", "mean_us"):
            best[mode][field] *= 0.7
    path = tmp_path / "needle.json"
    write(data, path)
    out = tmp_path / "run"
    argv = [
        "tune",
        str(SILU),
        "--backend",
        f"replay:{path}",
        "--shapes",
        "tokens=16,d=4096",
        "--sampler",
        "grid",
    ]
    assert main([*argv, "--trials", "400", "--out", str(out), "--quiet", "--holdout", "none"]) == 0
    capsys.readouterr()
    (done,) = [e for e in read_log(out / "log.jsonl") if e["event"] == "shape_done"]
    assert done["narrow"]["needle"] and done["narrow"]["within"] == 1
    again = done["remeasured"]
    assert again is not None and len(again["configs"]) == 3
    assert again["chosen"] == best["config"], "the replay answers alike twice: the needle stays"
    assert [e["event"] for e in read_log(out / "log.jsonl")].count("remeasure") == 3
    note = (out / "summary.md").read_text()
    assert "a narrow optimum" in note and "Re-measured, the 3 best took" in note
