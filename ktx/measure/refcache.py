"""The verdicts of the original kernel against the spec's float64 Python reference, on disk.

When a spec has a Python reference, the original kernel is checked against it (docs/spec.md,
"Verification"). That reference runs on the CPU in float64 and, at production shapes, takes
seconds per round: done for every measurement of the original it dominated a search's start
(issue 12: 66 s for one original at tokens=4096, d=14336). The original's verdict depends only
on the spec (its arguments, distributions, tolerances, kernel source and reference code), the
shape, the round's seed, the generator that drew the inputs and the device; so it is computed
once and kept here, keyed by all of these. Only passing verdicts are kept: a failing original
is a problem of the run, looked at again the next time.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ktx.measure.compile import cache_dir
from ktx.spec import Spec


@dataclass(frozen=True)
class Verdict:
    """The original's outcome against the Python reference in one round at one shape."""

    ok: bool
    max_abs_err: float = 0.0
    rel_err: float = 0.0
    message: str = ""


def spec_digest(spec: Spec) -> str:
    """A hash of what decides the reference check's outcome: the spec file, the kernel source
    (with its includes as written) and the Python reference module."""
    h = hashlib.sha256()
    h.update(spec.path.read_bytes() if spec.path.is_file() else str(spec.path).encode())
    h.update(b"\0")
    h.update(spec.source_text().encode())
    h.update(b"\0")
    h.update(spec.prelude.encode())  # a prelude file's text (a prelude_source is in the spec)
    if spec.reference.python:
        module = spec.reference.python.partition(":")[0]
        ref = spec.folder / f"{module.replace('.', '/')}.py"
        h.update(b"\0")
        h.update(ref.read_bytes() if ref.is_file() else b"")
    return h.hexdigest()[:24]


def verdict_key(digest: str, shape: str, seed: int, round_index: int, generator: str, device: str) -> str:
    return json.dumps([digest, shape, seed, round_index, generator, device], separators=(",", ":"))


class VerdictCache:
    """One JSON file per spec digest under ``<cache>/reference``; written atomically (several
    workers on one host may check the same original at once: the last writer wins, and any
    writer's verdict is as good as another's)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or (cache_dir() / "reference")

    def _path(self, digest: str) -> Path:
        return self.root / f"{digest}.json"

    def _load(self, digest: str) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self._path(digest).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, digest: str, key: str) -> Verdict | None:
        entry = self._load(digest).get(key)
        if not isinstance(entry, dict):
            return None
        try:
            return Verdict(
                ok=bool(entry["ok"]),
                max_abs_err=float(entry.get("max_abs_err", 0.0)),  # type: ignore[arg-type]
                rel_err=float(entry.get("rel_err", 0.0)),  # type: ignore[arg-type]
                message=str(entry.get("message", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, digest: str, key: str, verdict: Verdict) -> None:
        if not verdict.ok:
            return
        data = self._load(digest)
        data[key] = asdict(verdict)
        path = self._path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
