// RUN: ktx apply --passes hoist %s --diff 2>&1 | filecheck %s --match-full-lines
// Invariant math in two nested loops: one variable for both, declared before the outer loop;
// the square root of a value loaded from memory stays (a load is not hoisted).
__global__ void scale(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ var,
                      int n, float eps, float temp) {
  const int row = blockIdx.x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    y[row * n + i] = x[row * n + i] / sqrtf(var[row] + eps) * expf(-1.0f / temp);
    for (int k = 0; k < 4; ++k) {
      y[row * n + i] += expf(-1.0f / temp) * k / (n * 0.5f);
    }
  }
}

// CHECK: {{.*}}: remark: [hoist] scale: rewritten: rewritten; 1 value(s): expf(-1.0f / temp)
// CHECK: +  const float ktx_h0 = expf(-1.0f / temp);  // hoist: invariant in L0, L1
// CHECK: -    y[row * n + i] = x[row * n + i] / sqrtf(var[row] + eps) * expf(-1.0f / temp);
// CHECK: +    y[row * n + i] = x[row * n + i] / sqrtf(var[row] + eps) * ktx_h0;
// CHECK: -      y[row * n + i] += expf(-1.0f / temp) * k / (n * 0.5f);
// CHECK: +      y[row * n + i] += ktx_h0 * k / (n * 0.5f);
