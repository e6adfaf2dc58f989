"""Draft every benchmark kernel's spec with ``ktx init`` (in process, each under a time limit),
and start or record the hand edit.

    python benchmarks/realcode/drafts.py --start [IDS]   # write <id>/ktx.toml from the draft
                                                         # (and <id>/.draft.toml, git-ignored)
                                                         # where there is no spec yet: edit it
    python benchmarks/realcode/drafts.py --record [IDS]  # write <id>/init.diff: the edit, from
                                                         # .draft.toml to the finished ktx.toml

``cpu_check.py`` uses :func:`draft_kernel` to draft again with the ktx being measured.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from editstat import unified  # noqa: E402
from fetch import SRC, load_manifest  # noqa: E402

DRAFT_SECONDS = 120


@dataclass(frozen=True)
class Drafted:
    """What ``ktx init`` made of one kernel: a draft and its TODOs, or why it refused."""

    text: str = ""
    todos: tuple[str, ...] = ()
    refused: str = ""  # ktx's one-line error (the kernel cannot be drafted)
    crashed: str = ""  # anything else, or the time limit


class _TimeUp(Exception):
    pass


@contextmanager
def _limit(seconds: int) -> Iterator[None]:
    def ring(signum: int, frame: FrameType | None) -> None:
        raise _TimeUp()

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def source_path(kernel: Mapping[str, Any], src: Path = SRC) -> Path:
    return src / kernel["project"] / kernel["file"]


def kernel_dir(kernel: Mapping[str, Any]) -> Path:
    return HERE / kernel["id"]


def draft_kernel(kernel: Mapping[str, Any], src: Path = SRC, seconds: int = DRAFT_SECONDS) -> Drafted:
    """``ktx init`` on the kernel, as if its folder were ``<id>/`` (so ``source`` is relative)."""
    from ktx.ir.errors import KtxError

    from ktx.api import init

    try:
        with _limit(seconds):
            d = init(source_path(kernel, src), kernel["kernel"], kernel_dir(kernel))
    except KtxError as exc:
        return Drafted(refused=str(exc).splitlines()[0].replace(f"{src}/", ""))
    except _TimeUp:
        return Drafted(crashed=f"ktx init took over {seconds} s")
    except Exception as exc:  # a crash is a result of the benchmark, not its end
        return Drafted(crashed=f"{type(exc).__name__}: {exc}".splitlines()[0])
    # the draft's first line names the file by its absolute path: made relative, so that a draft
    # reads the same on every machine and the recorded edit compares with today's draft
    return Drafted(text=d.text.replace(f"{HERE}/", ""), todos=tuple(d.todos))


def ktx_commit() -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True
    )
    return proc.stdout.strip() or "unknown"


def draft_label() -> str:
    return f"draft (ktx init at {ktx_commit()})"


def placeholders(text: str) -> list[str]:
    """The draft's placeholder lines still in ``text`` (a spec with one is not finished)."""
    return [
        ln
        for ln in text.splitlines()
        if not ln.lstrip().startswith("#") and ('"TODO"' in ln or '"[TODO]"' in ln)
    ]


def selected(manifest: Mapping[str, Any], ids: Sequence[str]) -> list[dict[str, Any]]:
    ks = [k for k in manifest["kernels"] if not ids or k["id"] in ids]
    unknown = set(ids) - {k["id"] for k in ks}
    if unknown:
        raise SystemExit(f"unknown kernel ids: {', '.join(sorted(unknown))}")
    return ks


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--start", action="store_true", help="write drafts where no spec is yet")
    mode.add_argument("--record", action="store_true", help="write init.diff from .draft.toml to ktx.toml")
    p.add_argument("ids", nargs="*", help="kernel ids (default: all)")
    args = p.parse_args(argv)
    for k in selected(load_manifest(), args.ids):
        d = kernel_dir(k)
        if args.start:
            if (d / "ktx.toml").exists():
                continue
            got = draft_kernel(k)
            if not got.text:
                print(f"{k['id']}: {got.refused or got.crashed}")
                continue
            d.mkdir(exist_ok=True)
            (d / ".draft.toml").write_text(got.text)
            (d / ".draft_label").write_text(draft_label() + "\n")
            (d / "ktx.toml").write_text(got.text)
            print(f"{k['id']}: {len(got.todos)} TODOs", flush=True)
        else:
            if not (d / ".draft.toml").exists() or not (d / "ktx.toml").exists():
                continue
            if placeholders((d / "ktx.toml").read_text()):
                print(f"{k['id']}: placeholders left, not finished")
                (d / "init.diff").unlink(missing_ok=True)
                continue
            label = (d / ".draft_label").read_text().strip()
            diff = unified((d / ".draft.toml").read_text(), (d / "ktx.toml").read_text(), label)
            (d / "init.diff").write_text(diff)
            print(f"{k['id']}: init.diff {diff.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
