"""vectorize through a project's read-only load helper defined in an included header.

FasterTransformer's bias kernels read ``ldg(&bias[id % n])``, where ``ldg`` is a ``__device__``
template in ``utils/cuda_type_utils.cuh`` whose body is ``return __ldg(val);``. Before, the pass
saw an address passed to an unknown function and refused ("takes the address ... may be used in
any order" or an aliasing refusal). With the header read (:mod:`ktx.ir.load_helpers`) the call is
a load, packed like ``__ldg``; the rewrite keeps the helper call and builds for sm_90.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

HEADER = "template <typename T>\ninline __device__ T ldg(const T* val) {\n    return __ldg(val);\n}\n"

SRC = """\
#include "utils/type_utils.cuh"
template <typename T>
__global__ void add_bias_tanh(T* out, const T* bias, int m, int n) {
  for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < m * n; id += blockDim.x * gridDim.x) {
    T val = out[id];
    val = val + ldg(&bias[id % n]);
    out[id] = tanhf(val);
  }
}
void run(float* o, const float* b, int m, int n) { add_bias_tanh<float><<<m, 256>>>(o, b, m, n); }
"""

ROWS = """\
#include "utils/type_utils.cuh"
__global__ void t5_norm(float* out, const float* input, const float* gamma, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[blockIdx.x * n + i] = ldg(&input[blockIdx.x * n + i]) * ldg(&gamma[i]);
  }
}
void run(float* o, const float* x, const float* g, int m, int n) { t5_norm<<<m, 256>>>(o, x, g, n); }
"""


def _project(tmp_path: Path, header: str, source: str) -> Path:
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "type_utils.cuh").write_text(header)
    cu = tmp_path / "src" / "kernels" / "k.cu"
    cu.parent.mkdir(parents=True)
    cu.write_text(source)
    return cu


@pytest.mark.parametrize("source", [SRC, ROWS])
def test_a_header_load_helper_is_packed(tmp_path: Path, source: str) -> None:
    cu = _project(tmp_path, HEADER, source)
    t = apply(source, "vectorize", path=str(cu))
    assert [k.name for k in t.knobs] == ["VEC_L0"], remarks(t)
    assert "ldg(&" in t.instantiate({"VEC_L0": 4})


def test_a_helper_that_only_dereferences_keeps_the_address(tmp_path: Path) -> None:
    cu = _project(tmp_path, HEADER.replace("__ldg(val)", "*val"), ROWS)
    t = apply(ROWS, "vectorize", path=str(cu))
    assert not t.knobs
    assert any("address" in r or "alias" in r for r in remarks(t)), remarks(t)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("source", [SRC, ROWS])
def test_the_packed_rewrite_builds_for_sm90(tmp_path: Path, source: str) -> None:
    cu = _project(tmp_path, HEADER, source)
    t = apply(source, "vectorize", path=str(cu))
    for vec in t.knobs[0].values:
        out = cu.with_name(f"k{vec}.cu")
        out.write_text(t.instantiate({"VEC_L0": vec}))
        r = subprocess.run(
            [
                "nvcc",
                "-std=c++17",
                "-arch=sm_90",
                "-ptx",
                f"-I{tmp_path}",
                "-o",
                str(out.with_suffix(".ptx")),
                str(out),
            ],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr[-2000:]
