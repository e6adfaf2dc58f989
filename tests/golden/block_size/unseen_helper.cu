// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// The launch helper lives in a header ktx does not see: its arguments after the kernel are a
// params struct and the kernel's own arguments, not grid and block.

__global__ void scale(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

void run_scale(float* y, const float* x, float a, int n) {
  launch_params params;
  params.block_dim = dim3(256);
  params.grid_dim = dim3((n + 255) / 256);
  launch_kernel(scale, params, y, x, a, n);
}

// CHECK: {{.*}}: remark: [block-size] scale: skipped: no launch of scale in this file and no launch mapping given (pass the spec's)
// CHECK-NOT: {{[-+].*}}
