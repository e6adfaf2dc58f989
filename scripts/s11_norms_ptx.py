"""Compare the norms' emitted wide-row code with the hand cluster variants on CPU (issue 23 item 3).

For the suite's rmsnorm and fused_add_rmsnorm it instantiates ``block-size,cluster-rows,
row-registers`` at the configs that hold a row of d = 8192 (1024 packs) in a cluster's registers
(CLUSTER x 32 x BLOCK_Y x PACKS = 1024), the one-block form ``block-size,row-registers`` beside
them, and the hand kernels (benchmarks/norms_hand/cluster.cu; for rmsnorm also session 9's
benchmarks/cluster_rows); compiles each for sm_90 (nvcc ``-ptx``, then ``ptxas -v``) and prints
one Markdown row each: registers, spills, and the static PTX instructions on the reduction's
path: block barriers (``bar.sync``), cluster barriers (arrive / wait), ``mapa`` (a thread maps a
remote block's shared memory; the pass maps every rank in every thread), loads over
distributed shared memory, global loads and stores.

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
        "ld.shared::cluster": n(r"\bld\.shared::cluster"),
        "ld.global": n(r"\bld\.global"),
        "st.global": n(r"\bst\.global"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    hand = (ROOT / "benchmarks/norms_hand/cluster.cu").read_text()
    old = (ROOT / "benchmarks/cluster_rows/kernel.cu").read_text()
    rows: list[tuple[str, str, dict[str, str]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for kernel in ("rmsnorm", "fused_add_rmsnorm"):
            name = f"{kernel}_kernel<__nv_bfloat16>"
            orig = (ROOT / f"kernels/{kernel}/kernel.cu").read_text()
            rows.append((kernel, "original", stats(orig, name, work, f"{kernel}_orig")))
            src = _apply(kernel, ROWS_PIPE, {"BLOCK_Y": 16, "PACKS": 2})
            rows.append((kernel, f"{ROWS_PIPE} BLOCK_Y=16 PACKS=2", stats(src, name, work, f"{kernel}_rows")))
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
