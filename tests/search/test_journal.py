"""The run folder's default study: in memory, every change appended to ``study.jsonl``."""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna
import pytest
from ktx.ir.errors import KtxError
from optuna.storages.journal import JournalFileBackend

from ktx.search.journal import AppendOnlyJournal, journal_storage
from ktx.search.study import default_url, is_run_folder_url, open_storage, run_folder_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _fill(storage: optuna.storages.BaseStorage, n: int) -> list[tuple[dict[str, object], float | None]]:
    study = optuna.create_study(storage=storage, study_name="s", load_if_exists=True,
                                sampler=optuna.samplers.RandomSampler(seed=3))  # fmt: skip
    for i in range(n):
        trial = study.ask()
        trial.suggest_categorical("BLOCK", [64, 128, 256])
        trial.set_user_attr("ktx", {"key": f"k{i}"})
        study.tell(trial, float(i))
    study.ask()  # left RUNNING, as a kill leaves it
    return [(t.params, t.value) for t in study.trials]


def test_reopened_journal_holds_every_trial(tmp_path: Path) -> None:
    path = tmp_path / "study.jsonl"
    written = _fill(journal_storage(path), 7)
    again = optuna.load_study(study_name="s", storage=journal_storage(path))
    assert [(t.params, t.value) for t in again.trials] == written
    assert again.trials[3].user_attrs["ktx"] == {"key": "k3"}
    assert again.trials[-1].state == optuna.trial.TrialState.RUNNING


def test_optuna_reads_the_file_as_its_own_journal(tmp_path: Path) -> None:
    path = tmp_path / "study.jsonl"
    written = _fill(journal_storage(path), 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    assert [(t.params, t.value) for t in optuna.load_study(study_name="s", storage=theirs).trials] == written


def test_a_record_cut_by_a_kill_is_dropped_and_the_run_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "study.jsonl"
    _fill(journal_storage(path), 3)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"op_code": 5, "worker_id": "x", "tri')  # torn mid-record
    storage = journal_storage(path)
    assert path.read_bytes() == whole, "the torn tail is cut off the file"
    study = optuna.load_study(study_name="s", storage=storage)
    study.tell(study.ask(), 9.0)
    values = [t.value for t in optuna.load_study(study_name="s", storage=journal_storage(path)).trials]
    assert values[:3] == [0.0, 1.0, 2.0] and values[-1] == 9.0


def test_a_damaged_line_is_one_located_error(tmp_path: Path) -> None:
    path = tmp_path / "study.jsonl"
    _fill(journal_storage(path), 2)
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = "not json\n"
    path.write_text("".join(lines))
    with pytest.raises(KtxError) as err:
        AppendOnlyJournal(path)
    assert f"{path}:2:1: the study journal is damaged" in str(err.value)


def test_default_url(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert default_url(run) == f"journal:{run / 'study.jsonl'}"
    assert default_url(run, shared=True) == f"sqlite:///{run / 'study.db'}"
    assert is_run_folder_url(default_url(run), run) and is_run_folder_url(default_url(run, shared=True), run)
    assert not is_run_folder_url("postgresql://h/db", run)
    assert run_folder_storage(run) is None
    # A folder from before the journal resumes in its SQLite study.
    _fill(open_storage(default_url(run, shared=True)), 2)
    assert default_url(run) == f"sqlite:///{run / 'study.db'}"
    storage = run_folder_storage(run)
    assert storage is not None and len(optuna.load_study(study_name="s", storage=storage).trials) == 3


def test_a_reader_leaves_a_journal_being_written_alone(tmp_path: Path) -> None:
    """``ktx report`` may read a round's journal while a run appends to it: a line still being
    written is left out, not cut off the file, and the reader cannot write."""
    path = tmp_path / "study.jsonl"
    _fill(journal_storage(path), 2)
    live = path.read_bytes() + b'{"op_code": 5, "worker_id": "x", "tri'
    path.write_bytes(live)
    storage = journal_storage(path, writable=False)
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == 3
    assert path.read_bytes() == live
    with pytest.raises(KtxError, match="read only"):
        optuna.create_study(storage=storage, study_name="other")
    assert path.read_bytes() == live
