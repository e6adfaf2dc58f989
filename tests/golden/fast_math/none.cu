// RUN: ktx apply --passes fast-math %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: double precision and integer arithmetic only; nothing has a fast float variant.
__global__ void scale(double* __restrict__ y, const double* __restrict__ x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = exp(x[i]) / (double)(n / 2 + 1);
}

// CHECK: {{.*}}: remark: [fast-math] scale: skipped: no expf/logf/sinf/..., 1/sqrtf or float division in the kernel or the device functions it calls
// CHECK-NOT: {{[-+].*}}
