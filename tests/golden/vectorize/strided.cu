// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the store walks every other element (not contiguous in i), and the tail loop's start
// is not a plain thread stride; neither loop is vectorized.
__global__ void deinterleave(float* __restrict__ out, const float* __restrict__ in, int n, int from) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[2 * i] = in[i];
  }
  for (int i = from + threadIdx.x; i < n; i += blockDim.x) {
    out[i] = in[i];
  }
}

// CHECK: {{.*}}: remark: [vectorize] L0: skipped: the body writes out[2 * i], which is not element i of a row; packs would change which thread writes it
// CHECK: {{.*}}: remark: [vectorize] L1: skipped: cannot tell that start `from + threadIdx.x` and step `blockDim.x` split the index space between threads (expected threadIdx.x/blockDim.x, a grid stride, a lane, or 0/1)
// CHECK-NOT: {{[-+].*}}
