// per_token_group_quant_fp8: per-token, per-group dynamic quantisation to 8 bits (fp8 e4m3).
//
// Each row of input is cut into groups of group_size contiguous elements (128 for DeepSeek-style
// block quantisation). For every group:
//   absmax   = max(max |x|, eps)                 (eps seeds the running max, as SGLang does)
//   scale    = absmax / max_8bit                 (max_8bit = 448 for e4m3)
//   q        = clamp(x / scale, min_8bit, max_8bit), rounded to DST_T (fp8 e4m3, RN, saturating)
//
// Tensors (row-major, contiguous):
//   input     T      [num_tokens, hidden]                  hidden % group_size == 0
//   output_q  DST_T  [num_tokens, hidden]
//   output_s  float  [num_tokens, hidden / group_size]     one scale per group (row-major)
// Groups are numbered over the flattened tensor: group g covers input[g * group_size, ...), and its
// scale is output_s[g]. group_size must be a multiple of 8 (16-byte packs of bf16).
//
// Launch mapping (mirrors SGLang's per_token_group_quant_8bit):
//   16 threads per group; groups_per_block = 16 if num_groups % 16 == 0, else 8, 4, 2, 1
//   block = groups_per_block * 16 threads, grid = num_groups / groups_per_block
//   Each thread of a group walks it in 16-byte packs (for (i = lane; i < group_size / 8; i += 16)),
//   takes |x| max, the 16 threads combine it with __shfl_xor_sync over their half-warp, lane 0 writes
//   the scale, then a second walk quantises (the re-read is an L1 hit). The 8 fp8 results of a pack
//   go out in one 8-byte store (SGLang stores them one byte at a time).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace per_token_group_quant_detail {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// 16 bytes of T, moved with one 128-bit load.
template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
  __device__ __forceinline__ void load(const T* ptr) {
    *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(ptr);
  }
};

// N 8-bit outputs, moved with one N-byte store.
template <typename DST_T, int N>
struct alignas(N * sizeof(DST_T)) OutPack {
  DST_T v[N];
};

constexpr int THREADS_PER_GROUP = 16;

// Max over the 16 threads of a group. Groups sit in aligned half-warps, so the mask is the
// thread's own half-warp (a block of one group has only 16 threads).
__device__ __forceinline__ float group_reduce_max(float val) {
  const unsigned int mask = (threadIdx.x % 32 >= 16) ? 0xffff0000u : 0x0000ffffu;
  val = fmaxf(val, __shfl_xor_sync(mask, val, 8));
  val = fmaxf(val, __shfl_xor_sync(mask, val, 4));
  val = fmaxf(val, __shfl_xor_sync(mask, val, 2));
  val = fmaxf(val, __shfl_xor_sync(mask, val, 1));
  return val;
}

}  // namespace per_token_group_quant_detail

template <typename T, typename DST_T>
__global__ void per_token_group_quant_8bit_kernel(const T* __restrict__ input,
                                                  DST_T* __restrict__ output_q,
                                                  float* __restrict__ output_s,
                                                  const int group_size, const int num_groups,
                                                  const int groups_per_block, const float eps,
                                                  const float min_8bit, const float max_8bit) {
  using namespace per_token_group_quant_detail;
  constexpr int VEC = Pack<T>::N;

  const int local_group_id = threadIdx.x / THREADS_PER_GROUP;
  const int lane_id = threadIdx.x % THREADS_PER_GROUP;
  const long long global_group_id = (long long)blockIdx.x * groups_per_block + local_group_id;
  if (global_group_id >= num_groups) return;  // whole group exits together
  const long long group_offset = global_group_id * group_size;

  const T* __restrict__ group_input = input + group_offset;
  DST_T* __restrict__ group_output = output_q + group_offset;
  const int num_vec = group_size / VEC;

  // Pass 1: absmax of the group.
  float local_absmax = eps;
  for (int i = lane_id; i < num_vec; i += THREADS_PER_GROUP) {
    Pack<T> in;
    in.load(group_input + i * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      local_absmax = fmaxf(local_absmax, fabsf(to_float(in.v[j])));
    }
  }
  local_absmax = group_reduce_max(local_absmax);

  const float y_s = local_absmax / max_8bit;
  if (lane_id == 0) output_s[global_group_id] = y_s;

  // Pass 2: quantise.
  for (int i = lane_id; i < num_vec; i += THREADS_PER_GROUP) {
    Pack<T> in;
    in.load(group_input + i * VEC);
    OutPack<DST_T, VEC> q;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float q_val = fminf(fmaxf(to_float(in.v[j]) / y_s, min_8bit), max_8bit);
      q.v[j] = DST_T(q_val);
    }
    *reinterpret_cast<OutPack<DST_T, VEC>*>(group_output + i * VEC) = q;
  }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

// input: bf16 [num_tokens, hidden]; output_q: fp8 e4m3 [num_tokens, hidden];
// output_s: fp32 [num_tokens, hidden / group_size]. hidden % group_size == 0, group_size % 8 == 0.
void launch_per_token_group_quant_fp8(const __nv_bfloat16* input, __nv_fp8_e4m3* output_q,
                                      float* output_s, int num_tokens, int hidden, int group_size,
                                      float eps, cudaStream_t stream) {
  const int num_groups = (int)((long long)num_tokens * hidden / group_size);
  if (num_groups <= 0) return;
  constexpr int THREADS_PER_GROUP = 16;
  int groups_per_block = 1;
  if (num_groups % 16 == 0) {
    groups_per_block = 16;
  } else if (num_groups % 8 == 0) {
    groups_per_block = 8;
  } else if (num_groups % 4 == 0) {
    groups_per_block = 4;
  } else if (num_groups % 2 == 0) {
    groups_per_block = 2;
  }
  const int num_blocks = num_groups / groups_per_block;
  const int num_threads = groups_per_block * THREADS_PER_GROUP;
  const float fp8_max = 448.0f;  // largest finite e4m3
  dim3 grid(num_blocks);
  dim3 block(num_threads);
  per_token_group_quant_8bit_kernel<__nv_bfloat16, __nv_fp8_e4m3><<<grid, block, 0, stream>>>(
      input, output_q, output_s, group_size, num_groups, groups_per_block, eps, -fp8_max, fp8_max);
}
#endif  // __CUDACC_RTC__
