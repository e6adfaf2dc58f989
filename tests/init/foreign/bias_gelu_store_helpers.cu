// A bias + gelu written the way projects with their own memory helpers write it: the kernel never
// subscripts its arrays; it hands element addresses (x + base, b + base % cols) to 16-byte
// load/store helpers, and one to a combining helper whose reach ktx does not see.
#include <cuda_fp16.h>

namespace vecmem {
template <int Bytes, typename T>
__device__ __forceinline__ void load_16(T* dst, const T* src) { *(int4*)dst = *(const int4*)src; }
template <int Bytes, typename T>
__device__ __forceinline__ void store_16(T* dst, const T* src) { *(int4*)dst = *(const int4*)src; }
}  // namespace vecmem

template <typename T>
__device__ void accumulate_into(T* acc, const T* v) {
    for (int k = 0; k < 16 / (int)sizeof(T); k++) acc[k] += v[k];
}

__device__ float gelu_tanh(float v) { return 0.5f * v * (1.f + tanhf(0.79788456f * (v + 0.044715f * v * v * v))); }

template <typename T>
__global__ void bias_gelu_vec(T* x, const T* b, T* sum_out, int count, int cols) {
    constexpr int per = 16 / sizeof(T);
    const int base = (blockIdx.x * blockDim.x + threadIdx.x) * per;
    if (base < count) {
        T v[per], w[per];
        vecmem::load_16<16>(v, x + base);
        vecmem::load_16<16>(w, b + (base % cols));
        for (int k = 0; k < per; k++) v[k] = T(gelu_tanh(float(v[k]) + float(w[k])));
        vecmem::store_16<16>(x + base, v);
        accumulate_into(sum_out + base, v);
    }
}

void launch_bias_gelu(__half* x, const __half* b, __half* sum_out, int tokens, int hidden, cudaStream_t s) {
    const int count = tokens * hidden;
    const int per_block = 256 * 8;
    bias_gelu_vec<<<(count + per_block - 1) / per_block, 256, 0, s>>>(x, b, sum_out, count, hidden);
}
