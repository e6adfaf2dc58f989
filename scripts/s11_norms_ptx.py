"""Compare the norms' emitted wide-row code with the hand cluster variants on CPU (issue 23 item 3).

For the suite's rmsnorm and fused_add_rmsnorm it instantiates ``block-size,cluster-rows,
row-registers`` at the configs that hold a row of d = 8192 (1024 packs) in a cluster's registers
(CLUSTER x 32 x BLOCK_Y x PACKS = 1024), the one-block form ``block-size,row-registers`` beside
them, and the hand kernels (benchmarks/norms_hand/cluster.cu; for rmsnorm also session 9's
benchmarks/cluster_rows); compiles each for sm_90 (nvcc ``-ptx``, then ``ptxas -v``) and prints
one Markdown row each: registers, spills, and static PTX instruction counts: block barriers
(``bar.sync``), cluster barriers (arrive / wait), ``mapa`` (a thread maps a remote block's shared
memory; the pass maps every rank in every thread; DSMEM loads are generic ``ld`` after it),
shared stores (fused add's stash), global loads and stores (the pass keeps the original's
remainder loop and scalar tail, compiled in though they run only past threads x PACKS packs or
when d % 8 != 0). The one-block forms at d = 4096 (``block-size,row-registers`` and the hand
kernels of benchmarks/norms_hand/kernel.cu) come first (issue 23 item 2).

    .venv/bin/python scripts/s11_norms_ptx.py [--out FILE.md]
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
CLUSTER_PIPE = "block-size,cluster-rows,row-registers"
ROWS_PIPE = "block-size,row-registers"
#: (CLUSTER, BLOCK_Y, PACKS) that hold d = 8192 exactly
WIDE = ((8, 4, 1), (8, 2, 2), (4, 8, 1), (4, 4, 2), (2, 16, 1))


def _apply(kernel: str, pipe: str, config: dict[str, int]) -> str:
    cmd = [sys.executable, "-m", "ktx", "apply", "--passes", pipe, f"kernels/{kernel}/kernel.cu"]
    for k, v in config.items():
        cmd += ["--config", f"{k}={v}"]
    return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def stats(src: str, name: str, workdir: Path, tag: str, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """ptxas -v and static PTX counts of kernel ``name`` instantiated from ``src``."""
    cu = workdir / f"{tag}.cu"
    cu.write_text(src + f"\n__device__ void* ktx_ref_{tag} = (void*)&{name};\n")
    ptx = workdir / f"{tag}.ptx"
    subprocess.run(["nvcc", *FLAGS, *extra, "-ptx", "-o", str(ptx), str(cu)], check=True, capture_output=True)
    out = subprocess.run(
        ["ptxas", "-v", "-arch=sm_90", "-o", str(workdir / f"{tag}.cubin"), str(ptx)],
        check=True,
        capture_output=True,
        text=True,
    ).stderr
    regs = re.search(r"Used (\d+) registers", out)
    spill = re.search(r"(\d+) bytes spill stores", out)
    body = ptx.read_text()

    def n(pat: str) -> str:
        return str(len(re.findall(pat, body)))

    return {
        "regs": regs.group(1) if regs else "?",
        "spill": spill.group(1) if spill else "?",
        "bar.sync": n(r"\bbar(rier)?\.sync\b"),
        "cluster arrive": n(r"\bbarrier\.cluster\.arrive"),
        "cluster wait": n(r"\bbarrier\.cluster\.wait"),
        "mapa": n(r"\bmapa\."),
        "st.shared": n(r"\bst\.shared"),
        "ld.global": n(r"\bld\.global"),
        "st.global": n(r"\bst\.global"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    hand = (ROOT / "benchmarks/norms_hand/cluster.cu").read_text()
    old = (ROOT / "benchmarks/cluster_rows/kernel.cu").read_text()
    one = (ROOT / "benchmarks/norms_hand/kernel.cu").read_text()
    rows: list[tuple[str, str, dict[str, str]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for kernel in ("rmsnorm", "fused_add_rmsnorm"):
            name = f"{kernel}_kernel<__nv_bfloat16>"
            orig = (ROOT / f"kernels/{kernel}/kernel.cu").read_text()
            rows.append((kernel, "original", stats(orig, name, work, f"{kernel}_orig")))
            for y, p in ((8, 2), (4, 4), (16, 2)):  # the row in 2 / 4 packs at d = 4096, 2 at 8192
                src = _apply(kernel, ROWS_PIPE, {"BLOCK_Y": y, "PACKS": p})
                label = f"{ROWS_PIPE} BLOCK_Y={y} PACKS={p}"
                rows.append((kernel, label, stats(src, name, work, f"{kernel}_rows{y}_{p}")))
            for p in (2, 4):
                hname = f"{kernel}_rows_hand<__nv_bfloat16, {p}>"
                rows.append(
                    (kernel, f"hand one block a row PACKS={p}", stats(one, hname, work, f"{kernel}_h{p}"))
                )
            for c, y, p in WIDE:
                src = _apply(kernel, CLUSTER_PIPE, {"CLUSTER": c, "BLOCK_Y": y, "PACKS": p})
                label = f"{CLUSTER_PIPE} CLUSTER={c} BLOCK_Y={y} PACKS={p}"
                rows.append((kernel, label, stats(src, name, work, f"{kernel}_c{c}_{y}_{p}")))
                hname = f"{kernel}_cluster_hand<__nv_bfloat16, {p}, {c}>"
                label = f"hand cluster CLUSTER={c} PACKS={p} (block 32 x {y})"
                rows.append((kernel, label, stats(hand, hname, work, f"{kernel}_hand_c{c}_{p}")))
            if kernel == "rmsnorm":
                for c in (8, 4):
                    rows.append((kernel, f"session 9 hand (benchmarks/cluster_rows) CL={c} PACKS=2",
                                 stats(old, "rmsnorm_cluster_hand<__nv_bfloat16>", work, f"old{c}",
                                       (f"-DHAND_CL={c}",))))  # fmt: skip
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
