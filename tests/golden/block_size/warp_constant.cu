// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// A 2-D block whose x is 32 and whose kernel writes the warp size (a reduction helper from a
// header does the shuffles): x stays 32, the warps per block (y) vary, and the grid and shared
// memory computed from num_warps follow.
#include <algorithm>
float warp_sum(float v);  // shuffles, in a header ktx does not read

__global__ void row_norm(float* out, const float* in, int rows, int n) {
  constexpr int warp_size = 32;
  extern __shared__ float partial[];
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += warp_size) s += in[row * n + i];
  partial[threadIdx.y] = s;
  out[row] = partial[threadIdx.y];
}

void launch_row_norm(float* out, const float* in, int rows, int n) {
  const int num_warps = std::max(1, std::min(32, n / 256));
  const int blocks = (rows + num_warps - 1) / num_warps;
  row_norm<<<blocks, dim3(32, num_warps), num_warps * sizeof(float)>>>(out, in, rows, n);
}

// CHECK: {{.*}}: remark: [block-size] row_norm: rewritten: exposed BLOCK_Y {0, 1, 2, 4, 8, 16, 32}; x stays 32: the kernel writes the warp size 32 (line 9): it assumes x is one warp
// CHECK: +__global__ void __launch_bounds__(32 * KTX_BLOCK_Y) row_norm(float* out, const float* in, int rows, int n) {
// CHECK: -  const int num_warps = std::max(1, std::min(32, n / 256));
// CHECK: +  const int num_warps = KTX_PICK(KTX_BLOCK_Y, (std::max(1, std::min(32, n / 256))));
