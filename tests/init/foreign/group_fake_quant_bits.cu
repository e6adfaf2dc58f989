// Fake quantisation per group, written for ktx init's tests: one block per group, the group
// size derived by the launcher (total / groups) and a bit count the kernel only shifts by. Modelled
// on DeepSpeed's fake quantizer: num_bits must not become a shape variable sized {64, 4096}
// (1 << 4096), and no default point may give a group size of 0.
#include <cuda_fp16.h>

__global__ void group_fake_quant_kernel(float* vals, int group_size, int num_bits) {
  float* group = vals + blockIdx.x * group_size;
  float amax = 0.f;
  for (int i = threadIdx.x; i < group_size; i += blockDim.x) amax = fmaxf(amax, fabsf(group[i]));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, o));
  const float levels = (float)(1 << num_bits);
  const int q_max = (1 << (num_bits - 1)) - 1;
  const float scale = levels / (2.f * amax + 1e-5f);
  for (int i = threadIdx.x; i < group_size; i += blockDim.x) {
    float q = rintf(group[i] * scale);
    if (q > q_max) q = q_max;
    group[i] = q / scale;
  }
}

void group_fake_quant(float* vals, int total_count, int group_num, int num_bits, cudaStream_t stream) {
  group_fake_quant_kernel<<<group_num, 32, 0, stream>>>(vals, total_count / group_num, num_bits);
}
