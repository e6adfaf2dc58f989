// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the kernel never reads blockDim, so its work mapping is tied to the launch.
__global__ void fill(float* x) { x[blockIdx.x * 128 + threadIdx.x] = 0.f; }

void launch_fill(float* x, int blocks) { fill<<<blocks, 128>>>(x); }

// CHECK: {{.*}}: remark: [block-size] fill: skipped: the kernel never reads blockDim: its work mapping assumes the launch's block size
// CHECK-NOT: {{[-+].*}}
