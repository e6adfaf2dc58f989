// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// dim3 threads(32, 4, 1) with a device helper that shuffles over the warp: the helper assumes
// blockDim.x == warpSize, so no THREADS knob is offered for x (64 would drop the partial sums
// of threads 32-63).
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

__global__ void norm(float* out, const float* in, int rows, int d) {
  int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  float acc = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) acc += in[row * d + i] * in[row * d + i];
  acc = warp_sum(acc);
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * rsqrtf(acc / d);
}

void launch(float* out, const float* in, int rows, int d) {
  dim3 threads(32, 4, 1);
  norm<<<(rows + 3) / 4, threads>>>(out, in, rows, d);
}

// CHECK: {{.*}}: remark: [expose] THREADS: skipped: 32 is the warp width the kernel's shuffles assume (__shfl_xor_sync in warp_sum() at line 6: whole warps along x, blockDim.x == warpSize)
// CHECK-NOT: {{[-+].*}}
