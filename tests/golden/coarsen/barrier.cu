// RUN: ktx apply --passes coarsen %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: a barrier after the index cannot sit in a loop whose iterations may `continue`.
__global__ void stage(float* x, int n) {
  __shared__ float buf[128];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) x[i] = buf[127 - threadIdx.x];
}

void launch_stage(float* x, int n) { stage<<<(n + 127) / 128, 128>>>(x, n); }

// CHECK: {{.*}}: remark: [coarsen] stage: skipped: the kernel synchronises after its index (__syncthreads at line 7)
// CHECK-NOT: {{[-+].*}}
