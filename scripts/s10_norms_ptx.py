"""Compare row-registers' emitted code with the hand variants (benchmarks/norms_hand) on CPU.

For the suite's rmsnorm and fused_add_rmsnorm it instantiates the original, the pipeline
``block-size,row-registers`` at the configs the hand kernel's form needs at d = 4096 / 8192, and the
hand kernels at 1/2/4 packs; compiles each for sm_90 with nvcc (``-ptx``, then ``ptxas -v``) and
prints one Markdown row each: registers, spill bytes, stack frame, and the memory instructions
of the PTX split at the first barrier (``bar.sync``): global loads before it (the loads issued
ahead of the reduction), global loads after it (the row or weight read again), global stores and
shared loads/stores. The counts are static instructions, so they say how many times a row pack
is touched by the fully unrolled heads, not how many bytes a remainder loop moves.

    .venv/bin/python scripts/s10_norms_ptx.py [--out FILE.md]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["-std=c++17", "-use_fast_math", "--expt-relaxed-constexpr", "-arch=sm_90"]
PIPE = "block-size,row-registers"


def _apply(kernel: str, config: dict[str, int]) -> str:
    cmd = [sys.executable, "-m", "ktx", "apply", "--passes", PIPE, f"kernels/{kernel}/kernel.cu"]
    for k, v in config.items():
        cmd += ["--config", f"{k}={v}"]
    return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def _stats(src: str, name: str, workdir: Path, tag: str) -> dict[str, str]:
    cu = workdir / f"{tag}.cu"
    cu.write_text(src + f"\n__device__ void* ktx_ref_{tag} = (void*)&{name};\n")
    ptx = workdir / f"{tag}.ptx"
    subprocess.run(["nvcc", *FLAGS, "-ptx", "-o", str(ptx), str(cu)], check=True, capture_output=True)
    out = subprocess.run(
        ["ptxas", "-v", "-arch=sm_90", "-o", str(workdir / f"{tag}.cubin"), str(ptx)],
        check=True,
        capture_output=True,
        text=True,
    ).stderr
    regs = re.search(r"Used (\d+) registers", out)
    spill = re.search(r"(\d+) bytes spill stores", out)
    stack = re.search(r"(\d+) bytes stack frame", out)
    body = ptx.read_text()
    cut = body.find("bar.sync")
    before, after = (body[:cut], body[cut:]) if cut >= 0 else (body, "")

    def n(pat: str, text: str) -> int:
        return len(re.findall(pat, text))

    return {
        "regs": regs.group(1) if regs else "?",
        "spill": spill.group(1) if spill else "?",
        "stack": stack.group(1) if stack else "?",
        "ld.global before barrier": str(n(r"\bld\.global", before)),
        "ld.global after": str(n(r"\bld\.global", after)),
        "st.global": str(n(r"\bst\.global", body)),
        "ld.shared": str(n(r"\bld\.shared", body)),
        "st.shared": str(n(r"\bst\.shared", body)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    hand = (ROOT / "benchmarks/norms_hand/kernel.cu").read_text()
    rows: list[tuple[str, str, dict[str, str]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for kernel in ("rmsnorm", "fused_add_rmsnorm"):
            orig = (ROOT / f"kernels/{kernel}/kernel.cu").read_text()
            name = f"{kernel}_kernel<__nv_bfloat16>"
            rows.append((kernel, "original", _stats(orig, name, work, f"{kernel}_orig")))
            # d = 4096 is 512 packs: BLOCK_Y 8 x PACKS 2 and 4 x 4 hold the row (the hand kernel's
            # 2 and 4 packs); d = 8192 is 1024 packs: 16 x 2 and 8 x 4 (the block is a launch fact,
            # so one compile serves both widths at a given PACKS)
            for y, p in ((8, 2), (4, 4), (16, 2), (32, 1)):
                src = _apply(kernel, {"BLOCK_Y": y, "PACKS": p})
                rows.append(
                    (kernel, f"{PIPE} BLOCK_Y={y} PACKS={p}", _stats(src, name, work, f"{kernel}_{y}_{p}"))
                )
            for p in (1, 2, 4):
                hname = f"{kernel}_rows_hand<__nv_bfloat16, {p}>"
                rows.append((kernel, f"hand PACKS={p}", _stats(hand, hname, work, f"{kernel}_hand{p}")))
    cols = list(rows[0][2])
    lines = [
        "| kernel | code | " + " | ".join(cols) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in cols) + " |",
    ]
    lines += [f"| {k} | {c} | " + " | ".join(s[x] for x in cols) + " |" for k, c, s in rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
