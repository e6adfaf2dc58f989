"""Several workers on one study through PostgreSQL (``.ci/postgres.sh`` starts a server on
loopback and exports KTX_TEST_POSTGRES_URL), on the replay backend (a SYNTHETIC recording)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest

from ktx.search.runlog import read_log
from ktx.search.study import with_driver

from .conftest import SILU

URL = os.environ.get("KTX_TEST_POSTGRES_URL", "")
DB = with_driver(URL)  # what SQLAlchemy needs to pick psycopg2 when psycopg 3 is absent
BUDGET = 24
WORKERS = 3
SHAPES = "tokens=1,d=4096;tokens=16,d=4096"


@pytest.mark.skipif(
    not URL, reason="KTX_TEST_POSTGRES_URL is unset (.ci/postgres.sh sets it when it can start PostgreSQL)"
)
def test_workers_share_studies_through_postgres(tmp_path: Path, recording_path: Path) -> None:
    prefix = f"ci-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "ktx", "tune", str(SILU), "--backend", f"replay:{recording_path}",
        "--shapes", SHAPES, "--trials", str(BUDGET), "--seed", "3", "--sampler", "tpe",
        "--storage", URL, "--workers", str(WORKERS), "--study", prefix, "--out", str(out), "--quiet",
        "--throttle", "0.02",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    try:
        names = [s.study_name for s in optuna.get_all_study_summaries(DB) if s.study_name.startswith(prefix)]
        assert len(names) == 2
        measured = [e for e in read_log(out / "log.jsonl") if e["event"] == "measure" and e["config"]]
        by_worker = {str(e["worker"]).split(":")[0] for e in measured}
        assert {f"worker{i}" for i in range(WORKERS)} <= by_worker, "every worker measured"
        for name in names:
            study = optuna.load_study(study_name=name, storage=DB)
            keys = {
                t.user_attrs["ktx"]["key"] for t in study.trials if t.user_attrs.get("ktx", {}).get("key")
            }
            # the budget is shared: at most one evaluation in flight per other worker past it
            assert BUDGET <= len(keys) <= BUDGET + WORKERS - 1, name
            assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
        summary = json.loads((out / "summary.json").read_text())
        assert [r["evaluations"] >= BUDGET for r in summary["shapes"]] == [True, True]
    finally:
        for name in [s.study_name for s in optuna.get_all_study_summaries(DB)]:
            if name.startswith(prefix):
                optuna.delete_study(study_name=name, storage=DB)
