// group_quant_strided.cu with its amax loop's bound off by one (i <= group_size): lane 0 of
// every group loads 8 elements past its group, and the last group's load leaves the buffer.
#include <cuda_bf16.h>
#include <stdint.h>

__global__ void group_quant_int8_strided(const __nv_bfloat16* __restrict__ in, int8_t* __restrict__ out,
                                         float* __restrict__ scales, int group_size, int num_groups) {
  const int lane = threadIdx.x % 16;
  const int group = blockIdx.x * (blockDim.x / 16) + threadIdx.x / 16;
  if (group >= num_groups) return;
  const __nv_bfloat16* src = in + group * group_size;
  int8_t* dst = out + group * group_size;
  float amax = 0.f;
  for (int i = lane * 8; i <= group_size; i += 16 * 8) {
    uint4 v = *reinterpret_cast<const uint4*>(src + i);
    const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(&v);
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(__bfloat162float(h[j])));
  }
  for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o, 16));
  const float scale = amax / 127.f;
  if (lane == 0) scales[group] = scale;
  const float inv = scale > 0.f ? 1.f / scale : 0.f;
  for (int i = lane * 8; i < group_size; i += 16 * 8) {
    uint4 v = *reinterpret_cast<const uint4*>(src + i);
    const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(&v);
    uint2 packed;
    int8_t* q = reinterpret_cast<int8_t*>(&packed);
    for (int j = 0; j < 8; ++j) {
      q[j] = (int8_t)__float2int_rn(fminf(fmaxf(__bfloat162float(h[j]) * inv, -127.f), 127.f));
    }
    *reinterpret_cast<uint2*>(dst + i) = packed;
  }
}

void group_quant_int8(const __nv_bfloat16* in, int8_t* out, float* scales, int tokens, int hidden) {
  const int num_groups = tokens * hidden / 128;
  group_quant_int8_strided<<<(num_groups + 15) / 16, 256>>>(in, out, scales, 128, num_groups);
}
