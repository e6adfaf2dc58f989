"""benchmarks/norms_hand/cluster.cu: the hand cluster norms the session-11 harness times beside
cluster-rows (issue 23 item 3). On the CPU: every pack of a row of d = 8192 is owned by exactly one
(rank, thread, pack slot) at each cluster / block / packs the harness launches, and the kernels
build for sm_90 without spills and without a block barrier (the point of the form)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from s11_norms_paired import WIDE  # noqa: E402

NVCC = shutil.which("nvcc")


def owners(cluster: int, block_y: int, packs: int, d: int) -> list[int]:
    """How many (rank, thread, k) the kernel's index ``p = rank * threads + tid + k * cluster *
    threads`` gives each pack of the row (``p < d / 8`` guards the rest), as the kernel computes it."""
    threads = 32 * block_y
    count = [0] * (d // 8)
    for rank in range(cluster):
        for tid in range(threads):
            for k in range(packs):
                p = rank * threads + tid + k * cluster * threads
                if p < d // 8:
                    count[p] += 1
    return count


@pytest.mark.parametrize(("cluster", "block_y", "packs"), WIDE)
def test_each_pack_has_one_owner(cluster: int, block_y: int, packs: int) -> None:
    assert owners(cluster, block_y, packs, 8192) == [1] * 1024
    # the launch the harness gives it: block 32 x cdiv(d, 256 * packs * cluster)
    assert -(-8192 // (256 * packs * cluster)) == block_y
    # a row narrower than the cluster's packs leaves threads idle, never a pack twice or unread
    assert set(owners(cluster, block_y, packs, 4096)) == {1}


def test_owners_sees_a_gap() -> None:
    """The check can fail: a cluster too small for the row leaves packs unowned."""
    assert 0 in owners(2, 4, 1, 8192)


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
def test_hand_cluster_kernels_build_without_spills_or_block_barriers(tmp_path: Path) -> None:
    src = (ROOT / "benchmarks/norms_hand/cluster.cu").read_text()
    inst = []
    for c, _, p in WIDE[:2]:
        inst.append(f"template __global__ void rmsnorm_cluster_hand<__nv_bfloat16, {p}, {c}>(__nv_bfloat16*, "
                    "const __nv_bfloat16*, const __nv_bfloat16*, int, float);")  # fmt: skip
        inst.append(f"template __global__ void fused_add_rmsnorm_cluster_hand<__nv_bfloat16, {p}, {c}>("
                    "__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*, int, float);")  # fmt: skip
    cu = tmp_path / "k.cu"
    cu.write_text(src + "\n" + "\n".join(inst) + "\n")
    flags = ["-arch=sm_90", "-std=c++17", "-use_fast_math"]
    ptx = tmp_path / "k.ptx"
    subprocess.run([str(NVCC), *flags, "-ptx", "-o", str(ptx), str(cu)], check=True)
    out = subprocess.run(
        ["ptxas", "-v", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"), str(ptx)],
        check=True, capture_output=True, text=True,
    ).stderr  # fmt: skip
    assert len(re.findall(r"Compiling entry function", out)) == 4
    assert "spill" not in out or set(re.findall(r"(\d+) bytes spill stores", out)) == {"0"}
    body = ptx.read_text()
    assert not re.search(r"\bbar(rier)?\.sync\b", body), "no block barrier: the cluster barrier orders"
    assert len(re.findall(r"\bbarrier\.cluster\.wait", body)) == 8  # two per kernel
