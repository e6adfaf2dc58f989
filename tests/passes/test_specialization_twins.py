"""Passes that change a kernel's grid refuse where its name has another definition in the file.

FasterTransformer writes ``template <> __global__ void sigmoid_kernel(half2* ...)`` beside the
template: a launch names ``sigmoid_kernel`` either way, so a pass that rewrites one body and
divides the grid at every launch left the specialization doing 1/COARSEN of its work (coarsen),
its rows a block apart (rows-per-block) or every row once per grid y (split). vectorize refused
this in session 9 (ir/facts/packing.py); these tests pin the same for the other grid passes.
"""

from __future__ import annotations

import pytest
from passtest import apply, remarks

ITEM = """\
template <typename T>
__global__ void sigmoid_kernel(T* data, const int size) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index < size) {
    data[index] = (T)(1.0f / (1.0f + __expf(-(float)data[index])));
  }
}

template <>
__global__ void sigmoid_kernel(half2* data, const int size) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index < size / 2) {
    data[index] = h2rcp(__hadd2(make_half2(1, 1), h2exp(__hneg2(data[index]))));
  }
}

template <typename T>
void invokeSigmoid(T* data, const int size, cudaStream_t stream) {
  if (std::is_same<T, float>::value) {
    sigmoid_kernel<<<(size + 255) / 256, 256, 0, stream>>>(data, size);
  } else {
    sigmoid_kernel<<<(size / 2 + 255) / 256, 256, 0, stream>>>((half2*)data, size);
  }
}
"""

ROWS = """\
template <typename T>
__global__ void scale_rows(T* out, const T* in, int d) {
  const int row = blockIdx.x;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    out[row * d + i] = in[row * d + i] * (T)2;
  }
}

template <>
__global__ void scale_rows(half2* out, const half2* in, int d) {
  const int row = blockIdx.x;
  for (int i = threadIdx.x; i < d / 2; i += blockDim.x) {
    out[row * (d / 2) + i] = __hmul2(in[row * (d / 2) + i], make_half2(2, 2));
  }
}

void run(float* o, const float* i, half2* o2, const half2* i2, int d, int rows) {
  scale_rows<<<rows, 256>>>(o, i, d);
  scale_rows<<<rows, 256>>>(o2, i2, d);
}
"""

CASES = [
    ("coarsen", ITEM, "sigmoid_kernel", "dividing the grid by COARSEN"),
    ("rows-per-block", ROWS, "scale_rows", "giving each block ROWS rows"),
    ("split", ROWS, "scale_rows", "splitting the rows over a grid y"),
]


@pytest.mark.parametrize(("pipeline", "src", "kernel", "change"), CASES)
def test_a_specialization_twin_is_refused(pipeline: str, src: str, kernel: str, change: str) -> None:
    t = apply(src, pipeline, kernel=kernel)
    assert not t.knobs and t.source == src
    assert remarks(t) == [
        f"{kernel}: {kernel} has another definition (line 9: an overload or a specialization) whose "
        f"launches cannot be told apart from this one's: {change} would reach theirs too"
    ]


@pytest.mark.parametrize(("pipeline", "src", "kernel", "change"), CASES)
def test_without_the_twin_the_pass_applies(pipeline: str, src: str, kernel: str, change: str) -> None:
    alone = src[: src.index("template <>")] + src[src.index("\n}\n", src.index("template <>")) + 3 :]
    t = apply(alone, pipeline, kernel=kernel)
    assert [k.pass_name for k in t.knobs] == [pipeline]
