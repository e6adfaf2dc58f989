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

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ktx.draft.preproc import FileDirectives, directives

#: How many folders above the kernel's folder are searched for a header (a project's root is
#: rarely further up than this; further would walk unrelated trees).
_LEVELS = 4
#: Files read while following includes, and folders walked looking for one: bounds for huge trees.
_MAX_FILES = 400
_MAX_DIRS = 4000
#: A folder holding one of these is a project's root: the header search goes no higher.
_PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "CMakeLists.txt", "LICENSE", "README.md")
_SKIP_DIRS = frozenset({".git", "build", "node_modules", "__pycache__", ".venv", "third_party"})


@dataclass(frozen=True)
class Includes:
    """``dirs``: folders to pass as ``-I`` (absolute); ``missing``: quoted headers found nowhere;
    ``uninstalled``: angle-bracket headers a plain build reaches that are neither installed nor
    in the project (``<torch/extension.h>``, ``<cublas_v2.h>``); ``tested``: macros the files'
    conditions test that none of them defines (``BF16_AVAILABLE``: the build's ``-D``?)."""

    dirs: tuple[Path, ...]
    missing: tuple[str, ...]
    uninstalled: tuple[str, ...] = ()
    tested: tuple[str, ...] = ()


@functools.cache
def _host_dirs() -> tuple[Path, ...]:
    """The host C++ compiler's own search list (``<type_traits>``, ``<float.h>`` live in
    ``/usr/include/c++/12`` and gcc's folder, which no fixed list names): asked once."""
    cxx = next((c for c in (os.environ.get("CXX"), "g++", "c++", "clang++") if c and shutil.which(c)), None)
    if cxx is None:
        return ()
    try:
        proc = subprocess.run(
            [cxx, "-xc++", "-E", "-v", "-"], input="", capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    lines = proc.stderr.splitlines()
    try:
        start = lines.index("#include <...> search starts here:") + 1
        end = lines.index("End of search list.", start)
    except ValueError:
        return ()
    return tuple(Path(ln.strip()) for ln in lines[start:end] if ln.strip())


def _system_dirs() -> tuple[Path, ...]:
    """Where nvcc and the host compiler find angle-bracket headers without a flag."""
    homes = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        homes.append(Path(nvcc).resolve().parent.parent)
    homes.append(Path("/usr/local/cuda"))
    found = [*_host_dirs(), Path("/usr/include"), Path("/usr/local/include")]
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


#: ktx's own folders (its code, scripts, tests) in a source checkout. A kernel file inside
#: ktx's tree (the benchmark's fetched projects, a test's corpus) would otherwise find a header
#: it lacks in ktx's own ``scripts/corpus_stubs`` and draft ``-I`` to it: a folder no user's
#: project has, named as if it were the project's. Such a header is the user's to supply: a TODO.
_KTX_ROOT = Path(__file__).resolve().parents[2]
_OWN: tuple[Path, ...] = tuple(_KTX_ROOT / d for d in ("scripts", "tests", "ktx", "ir", "passes"))


def _own(folder: Path, start: Path) -> bool:
    """Whether ``folder`` is one of ktx's own, unless the kernel file is in it too: of this
    ktx, or of another checkout of it the upward search walks into (a clone beside the
    project, in ``/tmp``: its ``scripts/corpus_stubs`` is no more the project's)."""
    own = list(_OWN)
    for above in folder.parents:
        if (above / "ktx" / "draft" / "includes.py").is_file():
            own += [above / d for d in ("scripts", "tests", "ktx", "ir", "passes")]
            break
    return any(folder.is_relative_to(o) and not start.is_relative_to(o) for o in own)


def _search(name: str, start: Path) -> Path | None:
    """The folder ``D`` with ``D/name`` a file, in the folders at and above ``start``, nearest
    first; never one of ktx's own (:data:`_OWN`)."""
    roots = []
    for root in [start, *list(start.parents)[:_LEVELS]]:
        roots.append(root)
        if any((root / marker).exists() for marker in _PROJECT_MARKERS):
            break  # the project's root: folders beside it are other projects (a CI clone, ktx itself)
    for root in roots:
        for folder in _walk(root):
            if (folder / name).is_file() and not _own(folder, start):
                return folder
    return None


def _directives(path: Path) -> FileDirectives:
    try:
        return directives(path.read_text(errors="replace"))
    except OSError:
        return directives("")


def _both(a: bool | None, b: bool | None) -> bool | None:
    """Reached when both are: False if either is not, True if both are, else unknown."""
    if a is False or b is False:
        return False
    return True if a is True and b is True else None


_RANK = {False: 0, None: 1, True: 2}


def include_dirs(source: Path) -> Includes:
    """The ``-I`` folders ``source``'s includes need, and the headers found in no folder."""
    source = source.resolve()
    system = _system_dirs()
    dirs: list[Path] = []
    missing: list[str] = []
    uninstalled: list[str] = []
    tested: list[str] = []
    defined: set[str] = set()
    queue: list[tuple[Path, bool | None]] = [(source, True)]
    seen: dict[Path, bool | None] = {source: True}
    reads = 0
    while queue and reads <= _MAX_FILES:
        current, reached = queue.pop(0)
        reads += 1
        found_here = _directives(current)
        defined |= found_here.defines
        if reached is not False:
            tested += [n for n in found_here.tested if n not in tested]
        for inc in found_here.includes:
            live = _both(reached, inc.live)
            name = inc.name
            beside = current.parent / name
            if inc.quoted and beside.is_file():
                found: Path | None = beside
            else:
                found = next((d / name for d in (*dirs, *system) if (d / name).is_file()), None)
            if found is None and not inc.quoted and live is not True:
                # An angle-bracket header not installed, in a branch a plain build may not
                # take, is most often another platform's (<hip/hip_runtime.h>, <arm_neon.h>),
                # and a project file of the same name (ggml's vendors/musa.h for <musa.h>)
                # is not it: left alone.
                continue
            if found is None:
                folder = _search(name, source.parent)
                if folder is None:
                    where = missing if inc.quoted else uninstalled
                    if name not in where:
                        where.append(name)
                    continue
                dirs.append(folder)
                found = folder / name
            path = found.resolve()
            if any(path.is_relative_to(s) for s in system):
                continue
            if path not in seen or _RANK[live] > _RANK[seen[path]]:
                seen[path] = live
                queue.append((path, live))
    tested = [n for n in tested if n not in defined]
    return Includes(tuple(dirs), tuple(missing), tuple(uninstalled), tuple(tested))


#: Build files whose ``-D`` definitions a draft may read (beside the kernel or above it).
_BUILD_FILES = ("setup.py", "CMakeLists.txt", "Makefile", "build.py", "meson.build")
_BUILD_DEFINE = re.compile(
    r"""-D\s*([A-Za-z_]\w*)(=[^\s"',)\]]+)?"""
    r"|(?:add_compile_definitions|add_definitions|target_compile_definitions)\s*\(([^)]*)\)"
)


def build_defines(source: Path, levels: int = _LEVELS) -> dict[str, tuple[str, str]]:
    """``-DNAME[=V]`` definitions in the build files at and above ``source``'s folder, nearest
    first: name -> (the flag, where it was read as ``file:line``). A build file may define a
    name only under an option, so the draft shows where each came from (in its TODO)."""
    out: dict[str, tuple[str, str]] = {}
    start = source.resolve().parent
    for folder in [start, *list(start.parents)[:levels]]:
        for name in _BUILD_FILES:
            path = folder / name
            if not path.is_file():
                continue
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            for m in _BUILD_DEFINE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                where = f"{os.path.relpath(path, start)}:{line}"
                if m.group(1):
                    out.setdefault(m.group(1), (f"-D{m.group(1)}{m.group(2) or ''}", where))
                for word in re.findall(r"(?:-D)?([A-Za-z_]\w*(?:=\S+)?)", m.group(3) or ""):
                    macro = word.split("=")[0]
                    if macro.isupper() or "_" in macro:  # a CMake target's name is no macro
                        out.setdefault(macro, (f"-D{word}", where))
    return out


def _shown(names: tuple[str, ...] | list[str], most: int = 4) -> str:
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


def include_flags(source: Path, out_dir: Path) -> tuple[list[str], str | None]:
    """``-I`` flags relative to ``out_dir`` (where the spec is), and the TODO for headers found
    nowhere (the build fails without them: it blocks a run)."""
    found = include_dirs(source)
    flags = [f"-I{os.path.relpath(d, out_dir.resolve())}" for d in found.dirs]
    parts: list[str] = []
    if found.missing:
        parts.append(
            f"the kernel's file includes {_shown(found.missing)}, which ktx found beside no includer "
            f"and in no folder up to {_LEVELS} above the file: add -I for the folder that holds "
            "each (or drop it if only an unused #if branch includes it)"
        )
    if found.uninstalled:
        parts.append(
            f"a plain build includes <{'>, <'.join(found.uninstalled[:4])}>"
            + (f" and {len(found.uninstalled) - 4} more" if len(found.uninstalled) > 4 else "")
            + ", installed nowhere ktx looked (the CUDA toolkit, /usr/include) nor in the project: "
            "add -I for the folder that holds them (a library's headers, or stubs)"
        )
    if not parts:
        return flags, None
    return flags, "compile flags: " + "; ".join(parts)


def define_flags(source: Path) -> tuple[list[str], str | None]:
    """``-D`` flags read in the project's build files for macros the files test, and a TODO to
    check: which of those, and of the tested macros nothing defines (``BF16_AVAILABLE``), the
    project's build passes. The build succeeds either way, so this blocks nothing; it is why a
    drafted ``flags`` line may still differ from the project's."""
    tested = include_dirs(source).tested
    if not tested:
        return [], None
    known = build_defines(source)
    drafted = [n for n in tested if n in known]
    parts: list[str] = []
    if drafted:
        parts.append(
            "drafted "
            + ", ".join(f"{known[n][0]} (read in {known[n][1]})" for n in drafted)
            + ": keep those the project's build passes unconditionally"
        )
    rest = [n for n in tested if n not in known]
    if rest:
        parts.append(
            f"the files test {_shown(rest)} (#ifdef / defined), which none of them defines: "
            "add -DNAME for each the project's build defines (no -D is drafted)"
        )
    return [known[n][0] for n in drafted], "compile flags (check): " + "; ".join(parts)
