"""Worker handlers that misbehave on purpose, to test the protocol without a GPU."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from ktx.measure.worker import WorkerFailure


def handle(op: str, payload: Any) -> Any:
    if op == "echo":
        print("noise on stdout must not break the protocol")
        return {"echo": payload, "pid": os.getpid()}
    if op == "sleep":
        time.sleep(3600)
    if op == "exit":
        sys.stderr.write("about to die\n")
        sys.stderr.flush()
        os._exit(7)
    if op == "abort":
        os.abort()
    if op == "raise":
        raise ValueError("handler bug")
    if op == "wrong":
        raise WorkerFailure("wrong_result", "out differs", fatal=False, result={"n": 1})
    if op == "fatal":
        raise WorkerFailure("crash", "illegal address", fatal=True)
    if op == "pid":
        return os.getpid()
    raise KeyError(op)
