"""Every way a worker request can end, exercised with fake handlers (no GPU needed)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ktx.measure.protocol import Supervisor
from ktx.measure.types import Status

FAKE = str(Path(__file__).with_name("fake_handlers.py")) + ":handle"


@pytest.fixture
def sup() -> Supervisor:
    s = Supervisor(FAKE, startup_timeout=60)
    yield s
    s.close()


def test_ok_reply_survives_stdout_noise(sup: Supervisor) -> None:
    out = sup.call("echo", {"x": [1, 2]}, timeout=30)
    assert out.status is Status.OK and out.result["echo"] == {"x": [1, 2]}
    again = sup.call("echo", 3, timeout=30)
    assert again.ok and again.result["pid"] == out.result["pid"]  # same worker reused
    assert sup.starts == 1


def test_timeout_kills_and_replaces(sup: Supervisor) -> None:
    first = sup.call("pid", timeout=30).result
    start = time.monotonic()
    out = sup.call("sleep", timeout=1.0)
    assert out.status is Status.TIMEOUT and "killed" in out.message
    assert time.monotonic() - start < 10
    after = sup.call("pid", timeout=30)
    assert after.ok and after.result != first and sup.starts == 2


def test_exit_is_a_crash_with_stderr(sup: Supervisor) -> None:
    out = sup.call("exit", timeout=30)
    assert out.status is Status.CRASH
    assert "exit status 7" in out.message and "about to die" in out.message
    assert sup.call("echo", 1, timeout=30).ok


def test_abort_signal_is_a_crash(sup: Supervisor) -> None:
    out = sup.call("abort", timeout=30)
    assert out.status is Status.CRASH and "signal" in out.message
    assert sup.call("echo", 1, timeout=30).ok


def test_raise_is_a_crash_with_traceback(sup: Supervisor) -> None:
    pid = sup.call("pid", timeout=30).result
    out = sup.call("raise", timeout=30)
    assert out.status is Status.CRASH and "ValueError: handler bug" in out.message
    assert sup.call("pid", timeout=30).result != pid  # retired after an unexpected exception


def test_typed_non_fatal_failure_keeps_worker(sup: Supervisor) -> None:
    pid = sup.call("pid", timeout=30).result
    out = sup.call("wrong", timeout=30)
    assert out.status is Status.WRONG_RESULT and out.message == "out differs" and out.result == {"n": 1}
    assert sup.call("pid", timeout=30).result == pid


def test_typed_fatal_failure_replaces_worker(sup: Supervisor) -> None:
    pid = sup.call("pid", timeout=30).result
    out = sup.call("fatal", timeout=30)
    assert out.status is Status.CRASH and out.message == "illegal address"
    assert sup.call("pid", timeout=30).result != pid


def test_bad_handler_fails_to_start() -> None:
    with Supervisor("no_such_module_xyz:handle", startup_timeout=30) as s:
        out = s.call("echo", 1, timeout=10)
    assert out.status is Status.CRASH and "did not start" in out.message


def test_run_goes_on_after_every_failure(sup: Supervisor) -> None:
    statuses = [
        sup.call(op, timeout=2.0).status for op in ("sleep", "exit", "raise", "fatal", "wrong", "echo")
    ]
    assert statuses == [
        Status.TIMEOUT,
        Status.CRASH,
        Status.CRASH,
        Status.CRASH,
        Status.WRONG_RESULT,
        Status.OK,
    ]
