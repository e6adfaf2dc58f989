// RUN: ktx apply --passes rows-per-block %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: gridDim.x is read for something else than the step of a loop over rows.
__global__ void spread(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (float)gridDim.x;
}

void launch_spread(float* out, int n) { spread<<<(n + 255) / 256, 256>>>(out, n); }

// CHECK: {{.*}}: remark: [rows-per-block] spread: skipped: the kernel reads gridDim.x at line 5, not as the step of a loop over rows (row += gridDim.x): its blocks are already more than one row
// CHECK-NOT: {{[-+].*}}
