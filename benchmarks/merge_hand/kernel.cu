// Hand variant of kernels/merge_attn_states (issue 23, item 5): how much is left above the
// suite's kernel? Same contract, arguments and result (kernels/merge_attn_states/kernel.cu's
// header says it); what changes is how the bytes move:
//
//   * PACKS 16-byte packs a thread (a block's packs PACKS x blockDim apart, so each load
//     instruction stays coalesced across the warp), all prefix and suffix loads issued before
//     any LSE is read or any math runs: 2 x PACKS x 16 bytes in flight a thread;
//   * the value loads and the output stores are streaming (ld.global.cs / st.global.cs: read
//     once, written once, nothing to keep in L1/L2); the LSEs go through the read-only path
//     (__ldg), where the 8-16 threads of one (token, head) share the line;
//   * 256 threads a block (the suite's launch: 128).
//
// The kernel's arithmetic per element is two FMAs: if this variant does not beat the suite's
// kernel, the suite's kernel is at what its bytes allow (see benchmarks/merge_hand/README.md for
// the bytes and the H200's copy bandwidth at every shape of the suite).

#include <cuda_bf16.h>

namespace merge_hand_detail {

__device__ __forceinline__ uint4 load_stream(const void* p) {
  return __ldcs(reinterpret_cast<const uint4*>(p));
}

__device__ __forceinline__ void store_stream(void* p, uint4 v) {
  __stcs(reinterpret_cast<uint4*>(p), v);
}

}  // namespace merge_hand_detail

template <int PACKS>
__global__ void __launch_bounds__(256)
    merge_attn_states_hand(__nv_bfloat16* __restrict__ output, float* __restrict__ output_lse,
                           const __nv_bfloat16* __restrict__ prefix_output,
                           const float* __restrict__ prefix_lse,
                           const __nv_bfloat16* __restrict__ suffix_output,
                           const float* __restrict__ suffix_lse, const int num_tokens,
                           const int num_heads, const int head_size) {
  using namespace merge_hand_detail;
  constexpr int PACK = 8;  // bf16 elements in 16 bytes
  const unsigned int packs_per_head = head_size / PACK;
  const unsigned int total = (unsigned int)num_tokens * num_heads * packs_per_head;
  const unsigned int first = blockIdx.x * blockDim.x * PACKS + threadIdx.x;

  uint4 p_raw[PACKS], s_raw[PACKS];
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const unsigned int idx = first + k * blockDim.x;
    if (idx < total) {
      p_raw[k] = load_stream(prefix_output + (size_t)idx * PACK);
      s_raw[k] = load_stream(suffix_output + (size_t)idx * PACK);
    }
  }
  const float neg_inf = __int_as_float(0xff800000u);
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const unsigned int idx = first + k * blockDim.x;
    if (idx >= total) continue;
    const unsigned int token_head = idx / packs_per_head;
    const unsigned int pack = idx % packs_per_head;
    const unsigned int token = token_head / num_heads;
    const unsigned int head = token_head % num_heads;
    const unsigned int lse_idx = head * num_tokens + token;
    float p_lse = __ldg(prefix_lse + lse_idx);
    float s_lse = __ldg(suffix_lse + lse_idx);
    p_lse = isinf(p_lse) ? neg_inf : p_lse;
    s_lse = isinf(s_lse) ? neg_inf : s_lse;
    const float max_lse = fmaxf(p_lse, s_lse);
    if (isinf(max_lse)) {  // both sides empty: the prefix, LSE -inf
      store_stream(output + (size_t)idx * PACK, p_raw[k]);
      if (output_lse != nullptr && pack == 0) output_lse[lse_idx] = max_lse;
      continue;
    }
    const float p_se = expf(p_lse - max_lse);
    const float s_se = expf(s_lse - max_lse);
    const float out_se = p_se + s_se;
    const float p_scale = p_se / out_se;
    const float s_scale = s_se / out_se;
    const __nv_bfloat16* pv = reinterpret_cast<const __nv_bfloat16*>(&p_raw[k]);
    const __nv_bfloat16* sv = reinterpret_cast<const __nv_bfloat16*>(&s_raw[k]);
    uint4 o_raw;
    __nv_bfloat16* ov = reinterpret_cast<__nv_bfloat16*>(&o_raw);
#pragma unroll
    for (int i = 0; i < PACK; ++i) {
      ov[i] = __float2bfloat16_rn(__bfloat162float(pv[i]) * p_scale + __bfloat162float(sv[i]) * s_scale);
    }
    store_stream(output + (size_t)idx * PACK, o_raw);
    if (output_lse != nullptr && pack == 0) output_lse[lse_idx] = logf(out_se) + max_lse;
  }
}

// Explicit instantiations: the GPU script measures PACKS 1, 2 and 4.
template __global__ void merge_attn_states_hand<1>(__nv_bfloat16*, float*, const __nv_bfloat16*,
                                                   const float*, const __nv_bfloat16*, const float*,
                                                   int, int, int);
template __global__ void merge_attn_states_hand<2>(__nv_bfloat16*, float*, const __nv_bfloat16*,
                                                   const float*, const __nv_bfloat16*, const float*,
                                                   int, int, int);
template __global__ void merge_attn_states_hand<4>(__nv_bfloat16*, float*, const __nv_bfloat16*,
                                                   const float*, const __nv_bfloat16*, const float*,
                                                   int, int, int);

// Not a merge: the floor for these bytes. It reads what the merge reads (both value tensors and
// both LSEs, in the suite kernel's thread mapping, one 16-byte pack a thread) and writes what it
// writes (the output and, from the first pack of a head, output_lse), with no exp, division or
// branch on the LSEs: its result is wrong by design (output = prefix_output + 0 * suffix), so
// it is timed beside the original without verification (the GPU script says so), as the time a
// kernel of this traffic and launch takes on the device.
__global__ void merge_traffic_probe(__nv_bfloat16* __restrict__ output, float* __restrict__ output_lse,
                                    const __nv_bfloat16* __restrict__ prefix_output,
                                    const float* __restrict__ prefix_lse,
                                    const __nv_bfloat16* __restrict__ suffix_output,
                                    const float* __restrict__ suffix_lse, const int num_tokens,
                                    const int num_heads, const int head_size) {
  const unsigned int packs_per_head = head_size / 8;
  const unsigned int total = (unsigned int)num_tokens * num_heads * packs_per_head;
  const unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const unsigned int token_head = idx / packs_per_head;
  const unsigned int token = token_head / num_heads;
  const unsigned int head = token_head % num_heads;
  const unsigned int lse_idx = head * num_tokens + token;
  const uint4 p = *reinterpret_cast<const uint4*>(prefix_output + (size_t)idx * 8);
  const uint4 s = *reinterpret_cast<const uint4*>(suffix_output + (size_t)idx * 8);
  const float l = prefix_lse[lse_idx] + suffix_lse[lse_idx];
  // s joins through a mask that depends on loaded data (one NaN payload the inputs never hold),
  // so the compiler must keep its load: the probe moves every byte the merge moves
  const unsigned int keep = __float_as_uint(l) == 0x7fc00001u ? 0xffffffffu : 0u;
  uint4 o;
  o.x = p.x | (s.x & keep);
  o.y = p.y | (s.y & keep);
  o.z = p.z | (s.z & keep);
  o.w = p.w | (s.w & keep);
  *reinterpret_cast<uint4*>(output + (size_t)idx * 8) = o;
  if (output_lse != nullptr && idx % packs_per_head == 0) output_lse[lse_idx] = l;
}
