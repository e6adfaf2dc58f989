"""Fetch the real-code benchmark's sources: each kernel's file and the project headers it
includes, at the commits ``manifest.json`` pins, into a git-ignored folder (``src/`` here).

Only the manifest and the specs are committed, never the projects' code (their licences and
this repository's rule: ktx is measured on code it did not write). The folder this writes is
what the GPU host needs, since that host has no network: carry ``benchmarks/realcode/src`` with
the run (it is kept small on purpose: the kernel files and the transitive closure of the headers
they include from their own project, not whole trees).

    python benchmarks/realcode/fetch.py                   # from the mirrors (/work/.mirror)
    python benchmarks/realcode/fetch.py --clone-root /tmp/clones   # clone what has no mirror

Git access and the mirror layout are ``scripts/corpus_fetch.py``'s (the corpus sweep's fetcher);
this adds the include closure, so that a kernel builds with only the files it needs.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from corpus_fetch import clone, git, list_paths, mirror_dir  # noqa: E402

MANIFEST = HERE / "manifest.json"
SRC = HERE / "src"
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


@dataclass(frozen=True)
class ProjectPin:
    """One upstream project at one commit, with the folders its build puts on the include path
    (relative to the project root) and the ``-D`` flags it passes."""

    name: str
    repo: str
    commit: str
    include: tuple[str, ...]
    defines: tuple[str, ...]
    deps: tuple[DepPin, ...] = ()

    @classmethod
    def from_json(cls, name: str, d: Mapping[str, Any]) -> ProjectPin:
        deps = tuple(DepPin.from_json(x) for x in d.get("deps", ()))
        include, defines = tuple(d.get("include", ())), tuple(d.get("defines", ()))
        return cls(name, d["repo"], d["commit"], include, defines, deps)


@dataclass(frozen=True)
class DepPin:
    """A second repository whose headers a project's build fetches itself (lmdeploy's CMake
    ``FetchContent`` of fmt): its folders at a pinned commit go to ``src/<project>/_deps/<name>/``,
    and the specs name them with ``-I``. Without it the kernel file does not compile; with a
    vendored copy the benchmark would commit someone else's sources."""

    name: str
    repo: str
    commit: str
    folders: tuple[str, ...]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DepPin:
        return cls(d["name"], d["repo"], d["commit"], tuple(d["folders"]))


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def projects(manifest: Mapping[str, Any]) -> dict[str, ProjectPin]:
    return {name: ProjectPin.from_json(name, d) for name, d in manifest["projects"].items()}


def resolve(include: str, including: str, pin: ProjectPin, paths: frozenset[str]) -> list[str]:
    """The repository paths ``#include include`` in file ``including`` may reach: in the including
    file's folder and in each of the project's include folders (every one, not the first: a
    project with two headers of one name, DeepSpeed's v1 and v2 ``conversion_utils.h``, picks
    by the build's ``-I`` order, which differs between its kernels); none for a header from
    outside the project (CUDA, the C++ library, torch)."""
    hits = []
    for folder in (posixpath.dirname(including), *pin.include):
        cand = posixpath.normpath(posixpath.join(folder, include))
        if cand in paths and cand not in hits:
            hits.append(cand)
    return hits


def closure(git_dir: Path, pin: ProjectPin, roots: Iterable[str], paths: frozenset[str]) -> dict[str, bytes]:
    """The files ``roots`` need: themselves and every project header they include, transitively
    (every ``#include``, whatever ``#if`` it stands under: a superset, and still small)."""
    todo, seen = list(roots), {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        data = git(git_dir, "show", f"{pin.commit}:{path}")
        seen[path] = data
        for inc in _INCLUDE.findall(data.decode(errors="replace")):
            todo.extend(hit for hit in resolve(inc, path, pin, paths) if hit not in seen)
    return seen


def fetch(manifest: Mapping[str, Any], dest: Path, mirror_root: Path, clone_root: Path | None) -> list[str]:
    """Write every project's kernel files and their include closure under ``dest/<project>/``;
    returns one summary line per project."""
    lines = []
    files_by_project: dict[str, set[str]] = {}
    for k in manifest["kernels"]:
        # ``launchers``: the project's files that launch a kernel its own file never launches
        # (bitsandbytes' ops.cu beside kernels.cu): ``ktx init`` reads the launch there.
        files_by_project.setdefault(k["project"], set()).update([k["file"], *k.get("launchers", ())])
    for name, pin in projects(manifest).items():
        wanted = sorted(files_by_project.get(name, ()))
        if not wanted:
            continue
        gd = mirror_dir(mirror_root, pin.repo)
        if not gd.exists():
            gd = clone(pin.repo, pin.commit, clone_root or Path(tempfile.mkdtemp(prefix="ktx-realcode-")))
        paths = frozenset(list_paths(gd, pin.commit))
        missing = [f for f in wanted if f not in paths]
        if missing:
            raise SystemExit(f"{name}: not at {pin.commit[:12]}: {', '.join(missing)}")
        files = closure(gd, pin, wanted, paths)
        for path, data in files.items():
            out = dest / name / path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        size = sum(len(d) for d in files.values())
        for dep in pin.deps:
            size += fetch_dep(dep, dest / name / "_deps" / dep.name, mirror_root, clone_root)
        lines.append(
            f"{name}: {len(wanted)} kernel files + {len(files) - len(wanted)} headers, "
            f"{size / 1024:.0f} KiB at {pin.commit[:12]}"
        )
    return lines


def fetch_dep(dep: DepPin, dest: Path, mirror_root: Path, clone_root: Path | None) -> int:
    """Write ``dep``'s folders at its commit under ``dest``; returns the bytes written."""
    gd = mirror_dir(mirror_root, dep.repo)
    if not gd.exists():
        gd = clone(dep.repo, dep.commit, clone_root or Path(tempfile.mkdtemp(prefix="ktx-realcode-")))
    size = 0
    for path in list_paths(gd, dep.commit):
        if not any(path == f or path.startswith(f.rstrip("/") + "/") for f in dep.folders):
            continue
        data = git(gd, "show", f"{dep.commit}:{path}")
        out = dest / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        size += len(data)
    if not size:
        raise SystemExit(f"{dep.name}: nothing under {', '.join(dep.folders)} at {dep.commit[:12]}")
    return size


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--manifest", type=Path, default=MANIFEST)
    p.add_argument("--dest", type=Path, default=SRC, help="where the sources go (git-ignored)")
    p.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"), help="owner+name/repo git dirs")
    p.add_argument("--clone-root", type=Path, default=None, help="where to clone projects without a mirror")
    args = p.parse_args(argv)
    for line in fetch(load_manifest(args.manifest), args.dest, args.mirror_root, args.clone_root):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
