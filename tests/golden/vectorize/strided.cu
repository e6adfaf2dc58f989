// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the store walks every other element (not contiguous in i), and the tail loop (from a
// block-uniform offset, which packs could take) writes what the first loop wrote, with no barrier
// between; neither loop is vectorized.
__global__ void deinterleave(float* __restrict__ out, const float* __restrict__ in, int n, int from) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[2 * i] = in[i];
  }
  for (int i = from + threadIdx.x; i < n; i += blockDim.x) {
    out[i] = in[i];
  }
}

// CHECK: {{.*}}: remark: [vectorize] L0: skipped: the body writes out[2 * i], which is not element i of a row; packs would change which thread writes it
// CHECK: {{.*}}: remark: [vectorize] L1: skipped: out is also accessed at line 7 with no __syncthreads() in between; packs change which thread owns each element
// CHECK-NOT: {{[-+].*}}
