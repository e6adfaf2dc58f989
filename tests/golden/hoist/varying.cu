// RUN: ktx apply --passes hoist %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: every expensive expression depends on the loop (i, or s which the body updates), and
// the division of constants is left to the compiler.
__global__ void decay(float* __restrict__ y, const float* __restrict__ x, int n) {
  float s = 1.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    s = s * 0.5f;
    y[i] = expf(x[i]) / s + 1.0f / 3.0f + sqrtf((float)i);
  }
}

// CHECK: {{.*}}: remark: [hoist] decay: skipped: no loop-invariant division, square root or transcendental in any loop
// CHECK-NOT: {{[-+].*}}
