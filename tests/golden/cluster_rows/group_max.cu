// RUN: ktx apply --passes cluster-rows %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: 16 threads per group reduce with shuffles only; no block-wide reduction to split.
__global__ void group_absmax(float* __restrict__ s, const float* __restrict__ x, int group) {
  const int lane = threadIdx.x % 16;
  const long long g = (long long)blockIdx.x * (blockDim.x / 16) + threadIdx.x / 16;
  float m = 0.f;
  for (int i = lane; i < group; i += 16) m = fmaxf(m, fabsf(x[g * group + i]));
  for (int o = 8; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) s[g] = m;
}

void launch_group_absmax(float* s, const float* x, int groups, int group) {
  group_absmax<<<groups / 8, 128>>>(s, x, group);
}

// CHECK: {{.*}}: remark: [cluster-rows] group_absmax: skipped: no row loop: none strides over the row by the block's size (for (i = threadIdx.x; i < n; i += blockDim.x))
// CHECK-NOT: {{[-+].*}}
