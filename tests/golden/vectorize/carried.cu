// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: `last` carries a value from one iteration to the next (not a reduction), and the
// second loop synchronises the block inside its body.
__global__ void scan_like(float* __restrict__ out, const float* __restrict__ in, int n) {
  float last = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[i] = in[i] - last;
    last = in[i];
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[i] += 1.f;
    __syncthreads();
  }
}

// CHECK: {{.*}}: remark: [vectorize] L0: skipped: the body assigns last, declared outside the loop, from one iteration to the next (line 8); only reductions (+=, fmaxf(...)) can be reordered
// CHECK: {{.*}}: remark: [vectorize] L1: skipped: the body calls __syncthreads: threads would reach it a different number of times
// CHECK-NOT: {{[-+].*}}
