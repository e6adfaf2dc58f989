"""Build, or rebuild, vectorize's held-out corpus: kernels from three projects ktx was never
developed against (FasterTransformer, LightSeq, CTranslate2), at pinned commits.

Why a separate corpus: issue 22 measured vectorize on 115 held-out kernels that this repository
does not have. This is the closest honest stand-in: three projects that appear in neither
``scripts/corpus_fetch.py``'s corpus nor ``benchmarks/realcode/manifest.json`` (nor llm.c or
SGLang), rich in memory-bound elementwise and row kernels. Only ``manifest.json`` is committed;
the sources go to the git-ignored ``src/`` folder (never commit them).

    python benchmarks/vheld/fetch.py              # rebuild src/ from manifest.json (mirrors or clones)
    python benchmarks/vheld/fetch.py --select     # re-pick the files from the mirrors' HEAD and
                                                  # rewrite manifest.json (kernel names by a scan,
                                                  # not by ktx, so the list is independent of ktx)

The git access, the kernel scan and the manifest layout are ``scripts/corpus_fetch.py``'s, so
that ``scripts/sweep_corpus.py --manifest benchmarks/vheld/manifest.json`` reads it as is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "scripts"))

import corpus_fetch  # noqa: E402
from corpus_fetch import Project  # noqa: E402

MANIFEST = HERE / "manifest.json"
SRC = HERE / "src"

_FT = "src/fastertransformer/kernels/"
_LS = "lightseq/csrc/kernels/cuda/"

#: The files, chosen for memory-bound kernels (elementwise, bias/residual/activation, norms,
#: quantisers, transposes, RoPE, copies); attention, GEMM, top-k and beam search are left out.
SELECTION: tuple[Project, ...] = (
    Project(
        "fastertransformer",
        "NVIDIA/FasterTransformer",
        "heldout",
        tuple(
            _FT + f
            for f in (
                "activation_kernels.cu",
                "add_residual_kernels.cu",
                "add_bias_transpose_kernels.cu",
                "layernorm_kernels.cu",
                "quantization_int8_kernels.cu",
                "dequantize_kernels.cu",
                "matrix_transpose_kernels.cu",
                "transform_mask_kernels.cu",
                "vit_kernels.cu",
                "image_merge_kernels.cu",
                "reverse_roll_kernels.cu",
                "stop_criteria_kernels.cu",
                "normalize_kernels.cu",
            )
        ),
        ("src/fastertransformer/kernels", "src/fastertransformer/utils", "3rdparty"),
        ("", "src"),
    ),
    Project(
        "lightseq",
        "bytedance/lightseq",
        "heldout",
        tuple(
            _LS + f
            for f in (
                "transform_kernels.cu",
                "transform_kernels_new.cu",
                "normalize_kernels.cu",
                "dropout_kernels.cu",
                "llama_kernels.cu",
                "embedding_kernels.cu",
                "general_kernels.cu",
                "fused_adam_kernel.cu",
                "quantize_kernels.cu",
            )
        ),
        ("lightseq/csrc/kernels/cuda", "lightseq/csrc/kernels/includes"),
        ("lightseq/csrc/kernels/cuda/includes", "lightseq/csrc/kernels/includes"),
    ),
    Project(
        "ctranslate2",
        "OpenNMT/CTranslate2",
        "heldout",
        (
            "src/cuda/primitives.cu",
            "src/ops/*_gpu.cu",
            "src/ops/awq/dequantize_gpu.cu",
        ),
        ("include", "src"),
        ("include", "src"),
        ("*/gemv_gpu.cu", "*/nccl_ops_gpu.cu", "*/conv1d_cudnn_gpu.cu"),
    ),
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=SRC, help="where the sources go (git-ignored)")
    p.add_argument("--manifest", type=Path, default=MANIFEST)
    p.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    p.add_argument("--clone-root", type=Path, default=None, help="where to clone projects without a mirror")
    p.add_argument(
        "--select", action="store_true", help="re-pick files from the mirrors; rewrite the manifest"
    )
    args = p.parse_args(argv)
    if args.select:
        corpus_fetch.SELECTION = SELECTION  # select() reads the module's selection
        manifest: dict[str, Any] = corpus_fetch.select(args.mirror_root, args.corpus)
        manifest["root"] = "benchmarks/vheld/src"
        args.manifest.write_text(json.dumps(manifest, indent=1) + "\n")
        fs = manifest["files"]
        n = sum(len(f["kernels"]) for f in fs)
        print(f"{n} kernels in {len(fs)} files of {len({f['project'] for f in fs})} projects")
        return 0
    manifest = json.loads(args.manifest.read_text())
    corpus_fetch.rebuild(manifest, args.corpus, args.mirror_root, args.clone_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
