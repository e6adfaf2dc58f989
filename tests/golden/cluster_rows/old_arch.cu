// RUN: ktx apply --passes "cluster-rows{arch=80}" %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: clusters need sm_90; for an sm_80 target the pass refuses.
__global__ void row_max(float* __restrict__ out, const float* __restrict__ x, int d) {
  __shared__ float part[32];
  float m = -1e30f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) m = fmaxf(m, x[blockIdx.x * d + i]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < blockDim.x / 32; ++w) part[0] = fmaxf(part[0], part[w]);
  }
  __syncthreads();
  const float top = part[0];
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[blockIdx.x * d + i] = x[blockIdx.x * d + i] - top;
}

void launch_row_max(float* out, const float* x, int rows, int d) {
  row_max<<<rows, 128>>>(out, x, d);
}

// CHECK: {{.*}}: remark: [cluster-rows] row_max: skipped: thread-block clusters need sm_90 or later; the target is sm_80
// CHECK-NOT: {{[-+].*}}
