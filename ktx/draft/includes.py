"""The ``-I`` folders a drafted spec needs: the project's headers the kernel file includes.

A kernel in a real project includes headers that nvcc finds only with the project's ``-I``
folders (ggml's ``norm.cu`` -> ``common.cuh`` -> ``ggml.h`` in ``ggml/include``). A draft whose
``[compile] flags`` leave them out does not build, and nothing in it said so: the benchmark's
most common silently wrong line. So the drafter follows the quoted includes (transitively, as
the preprocessor would, through every branch) and, for a header not beside its includer nor in
a folder already chosen, looks for it in the folders above the kernel file, nearest first. A
header found nowhere (a generated file, a dependency outside the tree, an angle-bracket header
of a library that is not installed) becomes a TODO naming it, so the person adds the folder.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
#: How many folders above the kernel's folder are searched for a header (a project's root is
#: rarely further up than this; further would walk unrelated trees).
_LEVELS = 4
#: Files read while following includes, and folders walked looking for one: bounds for huge trees.
_MAX_FILES = 400
_MAX_DIRS = 4000
_SKIP_DIRS = frozenset({".git", "build", "node_modules", "__pycache__", ".venv", "third_party"})


@dataclass(frozen=True)
class Includes:
    """``dirs``: folders to pass as ``-I`` (absolute); ``missing``: headers found nowhere."""

    dirs: tuple[Path, ...]
    missing: tuple[str, ...]


def _system_dirs() -> tuple[Path, ...]:
    """Where nvcc and the host compiler find angle-bracket headers without a flag."""
    homes = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        homes.append(Path(nvcc).resolve().parent.parent)
    homes.append(Path("/usr/local/cuda"))
    found = [Path("/usr/include"), Path("/usr/local/include")]
    for home in homes:
        for inc in (home / "include", *sorted((home / "targets").glob("*/include"))):
            found += [inc, inc / "cccl"]  # CUDA 13 keeps CUB/Thrust/libcu++ under cccl/
    return tuple(dict.fromkeys(d.resolve() for d in found if d.is_dir()))


def _walk(root: Path) -> Iterator[Path]:
    """Folders under ``root``, shallow ones first, at most ``_MAX_DIRS``."""
    queue, seen = [root], 0
    while queue and seen < _MAX_DIRS:
        here = queue.pop(0)
        seen += 1
        yield here
        try:
            subs = sorted(e.path for e in os.scandir(here) if e.is_dir() and e.name not in _SKIP_DIRS)
        except OSError:
            continue
        queue.extend(Path(s) for s in subs)


def _search(name: str, start: Path) -> Path | None:
    """The folder ``D`` with ``D/name`` a file, in the folders at and above ``start``, nearest first."""
    roots = [start, *list(start.parents)[:_LEVELS]]
    for root in roots:
        for folder in _walk(root):
            if (folder / name).is_file():
                return folder
    return None


def _includes(path: Path) -> list[tuple[bool, str]]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [(m.group(1) == '"', m.group(2).strip()) for m in _INCLUDE.finditer(text)]


def include_dirs(source: Path) -> Includes:
    """The ``-I`` folders ``source``'s includes need, and the headers found in no folder."""
    source = source.resolve()
    system = _system_dirs()
    dirs: list[Path] = []
    missing: list[str] = []
    queue, seen = [source], {source}
    while queue and len(seen) <= _MAX_FILES:
        current = queue.pop(0)
        for quoted, name in _includes(current):
            beside = current.parent / name
            if quoted and beside.is_file():
                found: Path | None = beside
            else:
                found = next((d / name for d in (*dirs, *system) if (d / name).is_file()), None)
            if found is None and not quoted:
                # An angle-bracket header not installed is most often another platform's
                # (<hip/hip_runtime.h>, <arm_neon.h> in an #if branch), and a project file of
                # the same name (ggml's vendors/musa.h for <musa.h>) is not it: left alone.
                continue
            if found is None:
                folder = _search(name, source.parent)
                if folder is None:
                    if name not in missing:
                        missing.append(name)
                    continue
                dirs.append(folder)
                found = folder / name
            if (
                found is not None
                and found.resolve() not in seen
                and not any(found.resolve().is_relative_to(s) for s in system)
            ):
                seen.add(found.resolve())
                queue.append(found.resolve())
    return Includes(tuple(dirs), tuple(missing))


def include_flags(source: Path, out_dir: Path) -> tuple[list[str], str | None]:
    """``-I`` flags relative to ``out_dir`` (where the spec is), and the TODO for missing headers."""
    found = include_dirs(source)
    flags = [f"-I{os.path.relpath(d, out_dir.resolve())}" for d in found.dirs]
    if not found.missing:
        return flags, None
    more = len(found.missing) - 4
    shown = ", ".join(found.missing[:4]) + (f" and {more} more" if more > 0 else "")
    why = (
        f"compile flags: the kernel's file includes {shown}, which ktx found beside no includer "
        f"and in no folder up to {_LEVELS} above the file: add -I for the folder that holds "
        "each (or drop it if only an unused #if branch includes it)"
    )
    return flags, why
