// RUN: ktx apply --passes split %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the row loop feeds a block-wide reduction; blocks of one row cannot share it.
__global__ void row_norm(float* out, const float* in, int d) {
  __shared__ float warp_sums[32];
  float sum = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) sum += in[blockIdx.x * d + i] * in[blockIdx.x * d + i];
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < blockDim.x / 32; ++w) t += warp_sums[w];
    out[blockIdx.x] = sqrtf(t);
  }
}

void launch_row_norm(float* out, const float* in, int rows, int d) { row_norm<<<rows, 256>>>(out, in, d); }

// CHECK: {{.*}}: remark: [split] L0: skipped: loop L0 accumulates sum across the row, and the kernel combines it across the block after the loop (__shfl_xor_sync at line 7): split over blocks, each block would reduce only part of the row
// CHECK: {{.*}}: remark: [split] row_norm: skipped: not split: loop(s) L0 cannot be split, and the row loops of a kernel are split together
// CHECK-NOT: {{[-+].*}}
