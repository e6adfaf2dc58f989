// A rotary embedding over a [n2, n1, n0] tensor whose flat row index the kernel splits into its
// digits (ggml's rope kernels index this way); the launcher passes element strides it reads from
// its tensor descriptors, which ktx cannot follow: a contiguous tensor has s1 = n0,
// s2 = n0 * n1, s3 = n0 * n1 * n2.
#include <cstdint>

struct tensor_desc {
  int64_t ne[4];
  int64_t nb[4];
};

__global__ void rope_rows(const float* x, float* dst, const int n0, const int n1, const int n2, const int s1,
                          const int s2, const int s3, const float theta) {
  const int i0 = 2 * (blockDim.y * blockIdx.y + threadIdx.y);
  if (i0 >= n0) return;
  const int r = blockDim.x * blockIdx.x + threadIdx.x;
  const int i3 = r / (n1 * n2);
  const int i2 = (r - i3 * n1 * n2) / n1;
  const int i1 = r - i3 * n1 * n2 - i2 * n1;
  const int ix = i0 + i1 * s1 + i2 * s2 + i3 * s3;
  const float c = cosf(theta * i0), s = sinf(theta * i0);
  const float a = x[ix], b = x[ix + 1];
  dst[ix] = a * c - b * s;
  dst[ix + 1] = a * s + b * c;
}

void rope_rows_cuda(const float* x, float* dst, const int ne0, const int ne1, const int ne2, const tensor_desc& t,
                    const float theta) {
  const int s1 = t.nb[1] / sizeof(float);
  const int s2 = t.nb[2] / sizeof(float);
  const int s3 = t.nb[3] / sizeof(float);
  const dim3 blocks(ne1 * ne2, (ne0 + 255) / 256);
  rope_rows<<<blocks, dim3(1, 128)>>>(x, dst, ne0, ne1, ne2, s1, s2, s3, theta);
}
