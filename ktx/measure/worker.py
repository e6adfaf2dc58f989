"""The worker process: ``python -m ktx.measure.worker [--handler module:function]``.

Reads one JSON request per line on stdin, calls the handler with ``(op, payload)`` and writes one
JSON reply per line on the *original* stdout. Anything else that writes to stdout (a print, a C
library) is redirected to stderr first, so it cannot corrupt the protocol. A handler reports a
typed failure by raising :class:`WorkerFailure`; any other exception is a ``crash``. After a
fatal failure the worker exits, because its CUDA context can no longer be trusted.

The handler is the GPU measurement (:func:`ktx.measure.gpu.handle`) by default; tests plug in
fakes that sleep, exit or raise to exercise every failure of the protocol without a GPU.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from ktx.measure.protocol import WorkerFailure, handler_args

__all__ = ["WorkerFailure", "load_handler", "main"]

Handler = Callable[[str, Any], Any]


def load_handler(target: str) -> Handler:
    module_name, _, func_name = target.rpartition(":")
    if module_name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("ktx_worker_handler", module_name)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {module_name}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    handler: Handler = getattr(module, func_name)
    return handler


def paired(handler: Handler, payload: Any) -> list[list[Any]]:
    """The ``paired`` request: ``payload["jobs"]`` holds two measure jobs, run alternately
    (A B A B ...) ``payload["pairs"]`` times in this one process, so that both see the same
    process, clocks and buffers (the search's final check: :mod:`ktx.search.paired`)."""
    first, second = payload["jobs"]
    return [[handler("measure", first), handler("measure", second)] for _ in range(int(payload["pairs"]))]


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def main(argv: Sequence[str] | None = None) -> int:
    target = handler_args(sys.argv[1:] if argv is None else argv)
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(data: dict[str, Any]) -> None:
        proto.write(json.dumps(data, default=str) + "\n")
        proto.flush()

    try:
        handler = load_handler(target)
    except Exception:
        send({"ready": False, "error": _tail(traceback.format_exc())})
        return 1
    send({"ready": True, "pid": os.getpid(), "handler": target})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        rid = request.get("id")
        try:
            op, payload = request["op"], request.get("payload")
            result = paired(handler, payload) if op == "paired" else handler(op, payload)
            send({"id": rid, "ok": True, "result": result})
        except WorkerFailure as exc:
            send({"id": rid, "ok": False, "status": exc.status, "message": exc.message,
                  "fatal": exc.fatal, "result": exc.result})  # fmt: skip
            if exc.fatal:
                return 3
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}\n{_tail(traceback.format_exc())}"
            send({"id": rid, "ok": False, "status": "crash", "message": message, "fatal": True})
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
