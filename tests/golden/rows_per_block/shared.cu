// RUN: ktx apply --passes rows-per-block %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the block's shared memory holds one row's partial sums; stacked rows would share it.
__global__ void row_sum(float* __restrict__ out, const float* __restrict__ x, int d) {
  __shared__ float part[32];
  float s = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) s += x[blockIdx.x * d + i];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < blockDim.x / 32; ++w) t += part[w];
    out[blockIdx.x] = t;
  }
}

void launch_row_sum(float* out, const float* x, int rows, int d) { row_sum<<<rows, 256>>>(out, x, d); }

// CHECK: {{.*}}: remark: [rows-per-block] row_sum: skipped: the kernel uses shared memory (part), which the rows of a block would share
// CHECK-NOT: {{[-+].*}}
