// RUN: ktx apply --passes warp-reduce %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: interleaved addressing (tid % (2 * s)) and a product: trees the pass cannot prove.
__global__ void tree(float* __restrict__ out, const float* __restrict__ x) {
  __shared__ float s[256];
  const unsigned tid = threadIdx.x;
  s[tid] = x[blockIdx.x * 256 + tid];
  __syncthreads();
  for (unsigned k = 1; k < blockDim.x; k *= 2) {
    if (tid % (2 * k) == 0) s[tid] += s[tid + k];
    __syncthreads();
  }
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] *= s[tid + k];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}

void launch_tree(float* out, const float* x, int rows) { tree<<<rows, 256>>>(out, x); }

// CHECK: {{.*}}: remark: [warp-reduce] L0: skipped: a loop that synchronises and combines shared elements, but its stride does not halve from N / 2 (interleaved addressing?): not a tree the pass can prove
// CHECK: {{.*}}: remark: [warp-reduce] L1: skipped: `s[tid] *= s[tid + k];` is not sdata[tid] = sdata[tid] OP sdata[tid + k]
// CHECK-NOT: {{[-+].*}}
