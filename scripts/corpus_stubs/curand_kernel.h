// ktx corpus sweep stub: the device API of cuRAND that kernels call (the toolkit here ships no
// cuRAND). Enough to compile; the values are meaningless, nothing runs.
#pragma once
#include <cuda_runtime.h>

struct curandStatePhilox4_32_10 { uint4 ctr, output, key; unsigned int STATE; };
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;
struct curandStateXORWOW { unsigned int d, v[5]; };
typedef struct curandStateXORWOW curandStateXORWOW_t;
typedef curandStateXORWOW_t curandState_t;
typedef curandStateXORWOW_t curandState;

template <class S>
__device__ inline void curand_init(unsigned long long, unsigned long long, unsigned long long, S* s) { (void)s; }
template <class S> __device__ inline unsigned int curand(S*) { return 0u; }
template <class S> __device__ inline uint4 curand4(S*) { return make_uint4(0, 0, 0, 0); }
template <class S> __device__ inline float curand_uniform(S*) { return 0.5f; }
template <class S> __device__ inline double curand_uniform_double(S*) { return 0.5; }
template <class S> __device__ inline float4 curand_uniform4(S*) { return make_float4(0.5f, 0.5f, 0.5f, 0.5f); }
template <class S> __device__ inline double2 curand_uniform2_double(S*) { return make_double2(0.5, 0.5); }
template <class S> __device__ inline float curand_normal(S*) { return 0.f; }
template <class S> __device__ inline float2 curand_normal2(S*) { return make_float2(0.f, 0.f); }
template <class S> __device__ inline float4 curand_normal4(S*) { return make_float4(0.f, 0.f, 0.f, 0.f); }
