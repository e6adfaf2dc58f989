// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the kernel reads its block size as a parameter that the launcher also passes as the
// block (llm.c's mean_kernel does this): the launcher's value, not the kernel, would have to change.
__global__ void row_mean(float* mean, const float* inp, int C, int block_size) {
  float sum = 0.f;
  for (int i = threadIdx.x; i < C; i += block_size) sum += inp[blockIdx.x * C + i];
  atomicAdd(&mean[blockIdx.x], sum / C);
}

void launch_row_mean(float* mean, const float* inp, int rows, int C, int block_size) {
  row_mean<<<rows, block_size>>>(mean, inp, C, block_size);
}

// CHECK: {{.*}}: remark: [block-size] row_mean: skipped: the kernel reads its block size as the parameter block_size, which every launch also passes as the block: the launcher's value would have to follow the knob
// CHECK-NOT: {{[-+].*}}
