// RUN: ktx apply --passes cache-hints{stores=false} %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: x is read and written (in place), w is not __restrict__ while x is written: neither
// load may take the non-coherent read-only path.
__global__ void axpy_inplace(float* __restrict__ x, const float* w, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] + w[i];
}

// CHECK: {{.*}}: remark: [cache-hints] w:load: skipped: loads of w: not __restrict__, and the kernel writes x, which may alias it
// CHECK: {{.*}}: remark: [cache-hints] x:load: skipped: loads of x: the kernel writes it
// CHECK-NOT: {{[-+].*}}
