"""The harness side of the worker protocol: one child process, JSON lines, typed failures.

Kernels run in a child process (``python -m ktx.measure.worker``) so that what a bad kernel does
to its process (an illegal address poisons the CUDA context, a hang blocks forever, a fault
kills the interpreter) ends only that process. The parent sends one JSON request per line and
waits for one JSON reply with a deadline; it turns every way a request can end into an
:class:`Outcome`:

* a reply ``{"ok": true, "result": ...}``: the result;
* a reply ``{"ok": false, "status": ..., "message": ..., "fatal": ...}``: the handler reported
  (or raised) a failure; a fatal one retires the worker;
* no reply before the deadline: ``timeout``; the process group is killed;
* end of output (the process died): ``crash``, with the exit status and the end of stderr.

The next request after a retirement starts a fresh worker.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ktx.measure.types import Status

DEFAULT_HANDLER = "ktx.measure.gpu:handle"


class WorkerFailure(Exception):
    """Raised by a handler for a failure it can name: a Status value, a message, and whether
    the worker must be retired (fatal: e.g. its CUDA context is poisoned)."""

    def __init__(self, status: str, message: str, fatal: bool = False, result: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fatal = fatal
        self.result = result


@dataclass(frozen=True)
class Outcome:
    status: Status
    result: Any = None
    message: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


class WorkerProcess:
    """One live worker. Not thread-safe: one request at a time."""

    def __init__(
        self, handler: str, env: Mapping[str, str] | None = None, startup_timeout: float = 120.0
    ) -> None:
        cmd = [sys.executable, "-u", "-m", "ktx.measure.worker", "--handler", handler]
        child_env = dict(os.environ)
        if env:
            child_env.update(env)
        # The worker must import the same ktx as this process, wherever it was started from.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, child_env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=child_env,
            start_new_session=True,  # its own process group: a kill takes its children too
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=60)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self._next_id = 0
        hello = self._wait(startup_timeout)
        if hello is None or not hello.get("ready"):
            tail = self.stderr_tail()
            self.kill()
            raise RuntimeError(f"worker did not start: {hello!r}\n{tail}")
        self.info: dict[str, Any] = hello

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    def stderr_tail(self, lines: int = 20) -> str:
        return "\n".join(list(self._stderr)[-lines:])

    def _wait(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON line, None at end of output; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                raise TimeoutError from None
            if line is None:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                data: dict[str, Any] = json.loads(line)
            except ValueError:
                self._stderr.append(f"(stdout) {line}")
                continue
            return data

    def request(self, op: str, payload: Any, timeout: float) -> Outcome:
        self._next_id += 1
        rid = self._next_id
        start = time.monotonic()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"id": rid, "op": op, "payload": payload}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died(start)
        while True:
            try:
                reply = self._wait(timeout - (time.monotonic() - start))
            except TimeoutError:
                self.kill()
                return Outcome(
                    Status.TIMEOUT,
                    message=f"no answer within {timeout:g} s: worker killed",
                    seconds=time.monotonic() - start,
                )
            if reply is None:
                return self._died(start)
            if reply.get("id") != rid:
                continue  # a stale reply
            seconds = time.monotonic() - start
            if reply.get("ok"):
                return Outcome(Status.OK, reply.get("result"), seconds=seconds)
            status = Status(reply.get("status", "crash"))
            if reply.get("fatal", True):
                self.kill()
            return Outcome(status, reply.get("result"), str(reply.get("message", "")), seconds)

    def _died(self, start: float) -> Outcome:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        time.sleep(0.05)  # let the stderr reader catch up
        tail = self.stderr_tail()
        message = f"worker died ({how})" + (f": {tail}" if tail else "")
        return Outcome(Status.CRASH, message=message, seconds=time.monotonic() - start)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def close(self) -> None:
        """Ask politely (end of input), then kill."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


class Supervisor:
    """Keeps one worker alive across failures: a retired worker is replaced on the next call."""

    def __init__(
        self,
        handler: str = DEFAULT_HANDLER,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        self.handler = handler
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.worker: WorkerProcess | None = None
        self.starts = 0
        self.info: dict[str, Any] = {}

    def _ensure(self) -> WorkerProcess:
        if self.worker is None or not self.worker.alive:
            self.worker = WorkerProcess(self.handler, self.env, self.startup_timeout)
            self.info = self.worker.info
            self.starts += 1
        return self.worker

    def call(self, op: str, payload: Any = None, timeout: float = 60.0) -> Outcome:
        try:
            worker = self._ensure()
        except RuntimeError as exc:
            return Outcome(Status.CRASH, message=str(exc))
        outcome = worker.request(op, payload, timeout)
        if not worker.alive:
            self.worker = None
        return outcome

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def handler_args(argv: Sequence[str]) -> str:
    """``--handler module:function`` or ``path/to/file.py:function`` (default: the GPU one)."""
    args = list(argv)
    if "--handler" in args:
        return args[args.index("--handler") + 1]
    return DEFAULT_HANDLER
