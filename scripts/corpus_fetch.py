"""Build, or rebuild, the corpus of foreign CUDA kernels that ``scripts/sweep_corpus.py`` measures.

The corpus is source from projects ktx was not developed against, so it is never committed:
only ``results/corpus/manifest.json`` is (project, repository, commit, file, kernel names, and
split). This script turns that manifest back into files under a corpus folder (default
``/work/corpus``), reading each project from a git directory: a snapshot mirror
(``--mirror-root``, laid out ``owner+name/repo``) or a fresh clone of the manifest's commit.

    python scripts/corpus_fetch.py                      # rebuild /work/corpus from the manifest
    python scripts/corpus_fetch.py --select             # re-select files from the mirrors and
                                                        # write a new manifest (kernel names found
                                                        # by a scan, not by ktx, so that the list
                                                        # does not depend on the ktx being measured)

Besides each selected file, the headers of its project's ``context`` folders are extracted, so
that the compile check can build the original and the rewrite with the project's own includes.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).resolve().parent.parent / "results" / "corpus" / "manifest.json"
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".hh", ".inl", ".inc", ".cu")


@dataclass(frozen=True)
class Project:
    """One upstream project: which files hold the kernels of the corpus and which folders hold
    the headers they include. ``split`` is ``main`` (tuned against) or ``heldout`` (only ever
    measured, so that no helper fits the passes to it)."""

    name: str
    repo: str
    split: str
    files: tuple[str, ...]  # fnmatch patterns over repository paths
    context: tuple[str, ...]  # folders whose headers are extracted for the compile check
    include: tuple[str, ...] = ()  # extra -I folders (relative to the project root)
    exclude: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # extra -D flags the project's build passes


SELECTION: tuple[Project, ...] = (
    Project(
        "deepspeed",
        "microsoft/DeepSpeed",
        "main",
        (
            "csrc/quantization/*.cu",
            "csrc/fp_quantizer/*.cu",
            "csrc/lamb/*.cu",
            "csrc/random_ltd/*.cu",
            "csrc/spatial/csrc/*.cu",
            "csrc/transformer/*_kernels.cu",
            "csrc/transformer/inference/csrc/*.cu",
            "deepspeed/inference/v2/kernels/core_ops/bias_activations/*.cu",
            "deepspeed/inference/v2/kernels/core_ops/cuda_layer_norm/*.cu",
            "deepspeed/inference/v2/kernels/core_ops/cuda_rms_norm/*.cu",
            "deepspeed/inference/v2/kernels/core_ops/gated_activations/*.cu",
            "deepspeed/inference/v2/kernels/ragged_ops/*/*.cu",
        ),
        ("csrc/includes", "csrc", "deepspeed/inference/v2/kernels"),
        (
            "csrc/includes",
            "csrc/fp_quantizer/includes",
            "csrc/spatial/includes",
            "csrc/transformer/inference/includes",
            "deepspeed/inference/v2/kernels/includes",
            "deepspeed/inference/v2/kernels/ragged_ops",
            "deepspeed/inference/v2/kernels/ragged_ops/includes",
            "deepspeed/inference/v2/kernels/ragged_ops/ragged_helpers",
            "deepspeed/inference/v2/kernels/ragged_ops/top_k_gating",
            "deepspeed/inference/v2/ragged/includes",
        ),
        ("*/cublas_wrappers.cu", "*/fast_host_buffer.cu"),
        ("BF16_AVAILABLE",),
    ),
    Project(
        "bitsandbytes",
        "bitsandbytes-foundation/bitsandbytes",
        "main",
        ("csrc/kernels.cu",),
        ("csrc",),
        ("csrc",),
    ),
    Project(
        "apex",
        "NVIDIA/apex",
        "main",
        (
            "csrc/layer_norm_cuda_kernel.cu",
            "csrc/welford.cu",
            "csrc/multi_tensor_l2norm_kernel.cu",
            "csrc/update_scale_hysteresis.cu",
            "apex/contrib/csrc/xentropy/xentropy_kernel.cu",
            "apex/contrib/csrc/focal_loss/focal_loss_cuda_kernel.cu",
            "apex/contrib/csrc/index_mul_2d/index_mul_2d_cuda_kernel.cu",
            "apex/contrib/csrc/group_norm/group_norm_nhwc_fwd_two_pass.cu",
            "apex/contrib/csrc/group_norm/group_norm_nhwc_bwd_two_pass.cu",
            "apex/contrib/csrc/transducer/transducer_joint_kernel.cu",
            "apex/contrib/csrc/transducer/transducer_loss_kernel.cu",
            "apex/contrib/csrc/layer_norm/ln_fwd_kernels.cuh",
            "apex/contrib/csrc/layer_norm/ln_bwd_kernels.cuh",
        ),
        ("csrc", "apex/contrib/csrc"),
        ("csrc",),
    ),
    Project(
        "causal-conv1d",
        "Dao-AILab/causal-conv1d",
        "main",
        ("csrc/causal_conv1d_fwd.cu", "csrc/causal_conv1d_bwd.cu", "csrc/causal_conv1d_update.cu"),
        ("csrc",),
        ("csrc",),
    ),
    Project(
        "mamba",
        "state-spaces/mamba",
        "main",
        (
            "csrc/selective_scan/selective_scan_fwd_kernel.cuh",
            "csrc/selective_scan/selective_scan_bwd_kernel.cuh",
        ),
        ("csrc/selective_scan",),
        ("csrc/selective_scan",),
    ),
    Project(
        "flashinfer",
        "flashinfer-ai/flashinfer",
        "main",
        (
            "include/flashinfer/norm.cuh",
            "include/flashinfer/activation.cuh",
            "include/flashinfer/pos_enc.cuh",
            "include/flashinfer/quantization.cuh",
            "include/flashinfer/sampling.cuh",
            "include/flashinfer/page.cuh",
            "include/flashinfer/concat_mla.cuh",
            "include/flashinfer/fused_moe/hash_topk.cuh",
            "include/flashinfer/mamba/seq_chunk_cumsum.cuh",
        ),
        ("include/flashinfer",),
        ("include",),
    ),
    Project(
        "exllamav2",
        "turboderp/exllamav2",
        "heldout",
        ("exllamav2/exllamav2_ext/cuda/*.cu", "exllamav2/exllamav2_ext/cuda/q_mlp_*.cuh"),
        ("exllamav2/exllamav2_ext",),
        ("exllamav2/exllamav2_ext/cuda",),
        ("*/q_gemm.cu", "*/q_attn.cu", "*/h_gemm.cu", "*/tp.cu"),
    ),
    Project(
        "llm-awq",
        "mit-han-lab/llm-awq",
        "heldout",
        (
            "awq/kernels/csrc/layernorm/layernorm.cu",
            "awq/kernels/csrc/position_embedding/pos_encoding_kernels.cu",
            "awq/kernels/csrc/rope_new/fused_rope_with_pos.cu",
            "awq/kernels/csrc/w8a8/act.cu",
            "awq/kernels/csrc/w8a8/layernorm.cu",
            "awq/kernels/csrc/w8a8/quantization.cu",
            "awq/kernels/csrc/quantization/gemv_cuda.cu",
        ),
        ("awq/kernels/csrc",),
        ("awq/kernels/csrc",),
    ),
    Project(
        "xformers",
        "facebookresearch/xformers",
        "heldout",
        ("xformers/csrc/sparse24/sparse24_*.cu", "xformers/csrc/sparse24/sparseNM_dense.cu"),
        ("xformers/csrc",),
        ("xformers/csrc",),
        ("*/sparse24_gemm_sm90.cu", "*/sparse24_pack_test.cu"),
    ),
)


# -- finding kernels without ktx ------------------------------------------------------------------

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_IDENT_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^;{}()]*>)?\s*$")


def strip_comments(text: str) -> str:
    """Comments and string literals blanked (offsets kept), so that a ``__global__`` inside them
    does not count."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return _STRING.sub(blank, _COMMENT.sub(blank, text))


def _skip_parens(text: str, at: int) -> int:
    """Offset just past the parenthesis group opening at ``text[at] == '('``."""
    depth = 0
    for i in range(at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _in_define(text: str, at: int) -> bool:
    """Whether offset ``at`` lies in a ``#define`` (including its backslash continuations)."""
    line_start = text.rfind("\n", 0, at) + 1
    while True:
        line = text[line_start : text.find("\n", line_start) if "\n" in text[line_start:] else len(text)]
        if line.lstrip().startswith("#"):
            return line.lstrip()[1:].lstrip().startswith("define")
        if line_start == 0:
            return False
        prev_end = line_start - 1
        prev_start = text.rfind("\n", 0, prev_end) + 1
        if not text[prev_start:prev_end].rstrip().endswith("\\"):
            return False
        line_start = prev_start


def find_kernels(text: str) -> list[str]:
    """Names of the ``__global__`` functions *defined* in ``text`` (declarations ending in ``;``
    and kernels written inside a ``#define`` are left out), each once, in file order."""
    clean = strip_comments(text)
    names: list[str] = []
    for m in re.finditer(r"\b__global__\b", clean):
        if _in_define(clean, m.start()):
            continue
        at = m.end()
        paren = clean.find("(", at)
        # `__launch_bounds__(...)`, an attribute or an ALL_CAPS macro wrapping one may stand
        # before or after the return type
        while paren >= 0 and re.search(
            r"\b(__launch_bounds__|__attribute__|alignas|[A-Z][A-Z0-9_]*)\s*$", clean[at:paren]
        ):
            at = _skip_parens(clean, paren)
            paren = clean.find("(", at)
        if paren < 0:
            continue
        head = clean[at:paren]
        if ";" in head or "{" in head:
            continue
        name = _IDENT_BEFORE_PAREN.search(head)
        if name is None:
            continue
        close = _skip_parens(clean, paren)
        rest = clean[close : close + 400].lstrip()
        # a definition's body follows (possibly after `const`, `noexcept` or an attribute);
        # a declaration ends with `;`.
        brace, semi = rest.find("{"), rest.find(";")
        if brace < 0 or (0 <= semi < brace):
            continue
        if name.group(1) not in names:
            names.append(name.group(1))
    return names


# -- git access ----------------------------------------------------------------------------------


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def mirror_dir(root: Path, repo: str) -> Path:
    return root / repo.replace("/", "+") / "repo"


def clone(repo: str, commit: str, into: Path) -> Path:
    """A bare, blob-less clone of ``repo`` at ``commit`` (for a machine without the mirrors)."""
    dest = into / repo.replace("/", "+")
    if not dest.exists():
        url = f"https://github.com/{repo}.git"
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", url, str(dest)], check=True)
    subprocess.run(["git", f"--git-dir={dest}", "fetch", "origin", commit], check=False, capture_output=True)
    return dest


def list_paths(git_dir: Path, commit: str) -> list[str]:
    return git(git_dir, "ls-tree", "-r", "--name-only", commit).decode().splitlines()


def selected(project: Project, paths: Iterable[str]) -> list[str]:
    keep = [p for p in paths if any(fnmatch.fnmatch(p, pat) for pat in project.files)]
    return [p for p in keep if not any(fnmatch.fnmatch(p, pat) for pat in project.exclude)]


def context_paths(project: Project, paths: Iterable[str]) -> list[str]:
    dirs = tuple(d.rstrip("/") + "/" for d in project.context)
    return [p for p in paths if p.startswith(dirs) and p.endswith(HEADER_SUFFIXES)]


def extract(git_dir: Path, commit: str, paths: Sequence[str], dest: Path) -> None:
    for path in paths:
        out = dest / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(git(git_dir, "show", f"{commit}:{path}"))


# -- the two modes ------------------------------------------------------------------------------


def select(mirror_root: Path, corpus: Path) -> dict[str, Any]:
    """Choose the files of every project from its mirror, extract them, and return the manifest."""
    projects: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    for project in SELECTION:
        gd = mirror_dir(mirror_root, project.repo)
        if not gd.exists():
            print(f"skip {project.name}: no mirror at {gd}", file=sys.stderr)
            continue
        commit = git(gd, "rev-parse", "HEAD").decode().strip()
        paths = list_paths(gd, commit)
        chosen = selected(project, paths)
        extract(gd, commit, sorted(set(chosen) | set(context_paths(project, paths))), corpus / project.name)
        projects.append(
            {
                "project": project.name,
                "repo": project.repo,
                "commit": commit,
                "split": project.split,
                "context": list(project.context),
                "include": list(project.include),
                "defines": list(project.defines),
            }
        )
        for path in chosen:
            kernels = find_kernels((corpus / project.name / path).read_text(errors="replace"))
            if kernels:
                files.append(
                    {
                        "project": project.name,
                        "repo": project.repo,
                        "commit": commit,
                        "file": path,
                        "kernels": kernels,
                        "split": project.split,
                    }
                )
    return {"version": 1, "root": str(corpus), "projects": projects, "files": files}


def rebuild(manifest: dict[str, Any], corpus: Path, mirror_root: Path, clone_root: Path | None) -> None:
    """Recreate the corpus folder from a manifest: each file at its commit, plus the headers."""
    for proj in manifest["projects"]:
        gd = mirror_dir(mirror_root, proj["repo"])
        if not gd.exists():
            gd = clone(
                proj["repo"], proj["commit"], clone_root or Path(tempfile.mkdtemp(prefix="ktx-corpus-"))
            )
        paths = list_paths(gd, proj["commit"])
        dirs = tuple(d.rstrip("/") + "/" for d in proj["context"])
        ctx = [p for p in paths if p.startswith(dirs) and p.endswith(HEADER_SUFFIXES)]
        mine = [f["file"] for f in manifest["files"] if f["project"] == proj["project"]]
        extract(gd, proj["commit"], sorted(set(ctx) | set(mine)), corpus / proj["project"])
        print(f"{proj['project']}: {len(mine)} files at {proj['commit'][:12]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=Path("/work/corpus"), help="where the sources go")
    p.add_argument("--manifest", type=Path, default=MANIFEST, help="the manifest to read or write")
    p.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"), help="owner+name/repo git dirs")
    p.add_argument("--clone-root", type=Path, default=None, help="where to clone projects without a mirror")
    p.add_argument(
        "--select", action="store_true", help="select files from the mirrors and write the manifest"
    )
    args = p.parse_args(argv)
    if args.select:
        manifest = select(args.mirror_root, args.corpus)
        text = json.dumps(manifest, indent=1) + "\n"
        args.corpus.mkdir(parents=True, exist_ok=True)
        (args.corpus / "manifest.json").write_text(text)
        args.manifest.parent.mkdir(parents=True, exist_ok=True)
        args.manifest.write_text(text)
        for split in ("main", "heldout"):
            fs = [f for f in manifest["files"] if f["split"] == split]
            n = sum(len(f["kernels"]) for f in fs)
            print(f"{split}: {n} kernels in {len(fs)} files of {len({f['project'] for f in fs})} projects")
        return 0
    manifest = json.loads(args.manifest.read_text())
    rebuild(manifest, args.corpus, args.mirror_root, args.clone_root)
    (args.corpus / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
