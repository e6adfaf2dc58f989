// Per-token-group int8 quantisation: 16 threads per group, several groups per block, the
// count chosen by the launcher (gpb). Written for ktx init's tests, modelled on SGLang's
// per_token_group_quant_8bit.
#include <cuda_bf16.h>
#include <cstdint>

template <typename T>
__global__ void group_quant_int8_kernel(const T* __restrict__ input, int8_t* __restrict__ output_q,
                                        float* __restrict__ output_s, const int group_size,
                                        const int num_groups, const int groups_per_block,
                                        const float eps) {
  const int local_group = threadIdx.x / 16;
  const int lane = threadIdx.x % 16;
  const int group = blockIdx.x * groups_per_block + local_group;
  if (group >= num_groups) return;
  const T* group_in = input + group * group_size;
  int8_t* group_out = output_q + group * group_size;
  float amax = eps;
  for (int i = lane; i < group_size; i += 16) amax = fmaxf(amax, fabsf(static_cast<float>(group_in[i])));
  for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, o, 16));
  const float scale = amax / 127.f;
  if (lane == 0) output_s[group] = scale;
  for (int i = lane; i < group_size; i += 16) {
    float q = static_cast<float>(group_in[i]) / scale;
    group_out[i] = static_cast<int8_t>(fminf(fmaxf(rintf(q), -128.f), 127.f));
  }
}

void group_quant_int8(const __nv_bfloat16* input, int8_t* output_q, float* output_s,
                      int num_tokens, int hidden, int group_size, float eps, cudaStream_t stream) {
  const int num_groups = num_tokens * hidden / group_size;
  int gpb = 1;
  if (num_groups % 16 == 0) {
    gpb = 16;
  } else if (num_groups % 8 == 0) {
    gpb = 8;
  } else if (num_groups % 4 == 0) {
    gpb = 4;
  }
  const int num_blocks = num_groups / gpb;
  const int num_threads = gpb * 16;
  group_quant_int8_kernel<<<num_blocks, num_threads, 0, stream>>>(
      input, output_q, output_s, group_size, num_groups, gpb, eps);
}
