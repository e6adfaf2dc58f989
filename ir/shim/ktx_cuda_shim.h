// ktx_cuda_shim.h: just enough of CUDA for libclang to type-check kernels offline.
//
// ktx.ir.clang parses each file with `-x cuda --cuda-host-only -nocudainc -nostdinc`:
// no CUDA toolkit or C++ standard library is needed (or used, so results are the same on
// every machine). This header is force-included in their place. It declares the CUDA
// qualifiers, built-in variables, vector and low-precision types (with the sizes and
// alignments CUDA gives them, since passes ask "how many bytes is one element"), and the
// intrinsics kernels call. Declarations only: nothing here is ever executed.
//
// Written for ktx; the sizes follow the CUDA Programming Guide's table of vector types.

#pragma once

// ---- qualifiers and attributes ------------------------------------------------------
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

#define CUDART_VERSION 12040
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 4

// ---- fixed-width integers (no <cstdint> under -nostdinc) ----------------------------
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned long size_t;
typedef long ptrdiff_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
typedef unsigned int uint;

// ---- vector types -------------------------------------------------------------------
#define KTX_SHIM_VEC2(T, N, A) \
  struct __attribute__((aligned(A))) N { T x, y; };
#define KTX_SHIM_VEC3(T, N) \
  struct N { T x, y, z; };
#define KTX_SHIM_VEC4(T, N, A) \
  struct __attribute__((aligned(A))) N { T x, y, z, w; };

KTX_SHIM_VEC2(signed char, char2, 2)
KTX_SHIM_VEC4(signed char, char4, 4)
KTX_SHIM_VEC2(unsigned char, uchar2, 2)
KTX_SHIM_VEC4(unsigned char, uchar4, 4)
KTX_SHIM_VEC2(short, short2, 4)
KTX_SHIM_VEC4(short, short4, 8)
KTX_SHIM_VEC2(unsigned short, ushort2, 4)
KTX_SHIM_VEC4(unsigned short, ushort4, 8)
KTX_SHIM_VEC2(int, int2, 8)
KTX_SHIM_VEC3(int, int3)
KTX_SHIM_VEC4(int, int4, 16)
KTX_SHIM_VEC2(unsigned int, uint2, 8)
KTX_SHIM_VEC3(unsigned int, uint3)
KTX_SHIM_VEC4(unsigned int, uint4, 16)
KTX_SHIM_VEC2(long long, longlong2, 16)
KTX_SHIM_VEC2(unsigned long long, ulonglong2, 16)
KTX_SHIM_VEC2(float, float2, 8)
KTX_SHIM_VEC3(float, float3)
KTX_SHIM_VEC4(float, float4, 16)
KTX_SHIM_VEC2(double, double2, 16)

#undef KTX_SHIM_VEC2
#undef KTX_SHIM_VEC3
#undef KTX_SHIM_VEC4

struct dim3 {
  unsigned int x, y, z;
  __host__ __device__ dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  __host__ __device__ dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

__host__ __device__ float2 make_float2(float, float);
__host__ __device__ float4 make_float4(float, float, float, float);
__host__ __device__ int2 make_int2(int, int);
__host__ __device__ int4 make_int4(int, int, int, int);
__host__ __device__ uint2 make_uint2(unsigned int, unsigned int);
__host__ __device__ uint4 make_uint4(unsigned int, unsigned int, unsigned int, unsigned int);

// ---- built-in variables -------------------------------------------------------------
extern __device__ const uint3 threadIdx;
extern __device__ const uint3 blockIdx;
extern __device__ const dim3 blockDim;
extern __device__ const dim3 gridDim;
extern __device__ const int warpSize;

// ---- half, bfloat16 and fp8 ---------------------------------------------------------
// Storage-only structs with the sizes CUDA gives them; conversions to and from float are
// declared so `float(x)` and `T(f)` type-check the way they do with the real headers.
struct __attribute__((aligned(2))) __half {
  unsigned short __x;
  __host__ __device__ __half();
  __host__ __device__ __half(float);
  __host__ __device__ operator float() const;
};
struct __attribute__((aligned(4))) __half2 {
  __half x, y;
};
struct __attribute__((aligned(2))) __nv_bfloat16 {
  unsigned short __x;
  __host__ __device__ __nv_bfloat16();
  __host__ __device__ __nv_bfloat16(float);
  __host__ __device__ operator float() const;
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
struct __nv_fp8_e4m3 {
  __nv_fp8_storage_t __x;
  __host__ __device__ __nv_fp8_e4m3();
  __host__ __device__ __nv_fp8_e4m3(float);
  __host__ __device__ operator float() const;
};
struct __nv_fp8_e5m2 {
  __nv_fp8_storage_t __x;
  __host__ __device__ __nv_fp8_e5m2();
  __host__ __device__ __nv_fp8_e5m2(float);
  __host__ __device__ operator float() const;
};
struct __attribute__((aligned(2))) __nv_fp8x2_e4m3 { __nv_fp8x2_storage_t __x; };
struct __attribute__((aligned(4))) __nv_fp8x4_e4m3 { __nv_fp8x4_storage_t __x; };
struct __attribute__((aligned(2))) __nv_fp8x2_e5m2 { __nv_fp8x2_storage_t __x; };

__host__ __device__ __half __float2half(float);
__host__ __device__ float __half2float(__half);
__host__ __device__ __nv_bfloat16 __float2bfloat16(float);
__host__ __device__ __nv_bfloat16 __float2bfloat16_rn(float);
__host__ __device__ float __bfloat162float(__nv_bfloat16);
__host__ __device__ float2 __half22float2(__half2);
__host__ __device__ __half2 __float22half2_rn(float2);
__host__ __device__ float2 __bfloat1622float2(__nv_bfloat162);
__host__ __device__ __nv_bfloat162 __float22bfloat162_rn(float2);
__host__ __device__ __nv_bfloat162 __floats2bfloat162_rn(float, float);

// ---- device intrinsics --------------------------------------------------------------
template <typename T> __device__ T __shfl_sync(unsigned int mask, T var, int src, int width = 32);
template <typename T> __device__ T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = 32);
template <typename T> __device__ T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = 32);
template <typename T> __device__ T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = 32);
__device__ unsigned int __ballot_sync(unsigned int mask, int predicate);
__device__ int __all_sync(unsigned int mask, int predicate);
__device__ int __any_sync(unsigned int mask, int predicate);
__device__ unsigned int __activemask();
__device__ void __syncthreads();
__device__ int __syncthreads_count(int);
__device__ void __syncwarp(unsigned int mask = 0xffffffffu);
__device__ void __threadfence();
__device__ void __threadfence_block();
template <typename T> __device__ T __ldg(const T* ptr);
template <typename T> __device__ T __ldcs(const T* ptr);
template <typename T> __device__ T __ldcg(const T* ptr);
template <typename T> __device__ void __stcs(T* ptr, T value);
template <typename T> __device__ void __stcg(T* ptr, T value);
template <typename T> __device__ void __stwt(T* ptr, T value);
template <typename T> __device__ T atomicAdd(T* address, T value);
template <typename T> __device__ T atomicMax(T* address, T value);
template <typename T> __device__ T atomicMin(T* address, T value);
template <typename T> __device__ T atomicExch(T* address, T value);
template <typename T> __device__ T atomicCAS(T* address, T compare, T value);
__device__ int __popc(unsigned int);
__device__ int __clz(int);
__device__ int __ffs(int);
__device__ unsigned int __byte_perm(unsigned int, unsigned int, unsigned int);
__device__ long long clock64();
__device__ float __int_as_float(int);
__device__ int __float_as_int(float);
__device__ float __uint_as_float(unsigned int);
__device__ unsigned int __float_as_uint(float);

// ---- math ---------------------------------------------------------------------------
__host__ __device__ float rsqrtf(float);
__host__ __device__ float sqrtf(float);
__host__ __device__ float expf(float);
__host__ __device__ float exp2f(float);
__host__ __device__ float logf(float);
__host__ __device__ float log2f(float);
__host__ __device__ float tanhf(float);
__host__ __device__ float erff(float);
__host__ __device__ float fabsf(float);
__host__ __device__ float fmaxf(float, float);
__host__ __device__ float fminf(float, float);
__host__ __device__ float fmaf(float, float, float);
__host__ __device__ float powf(float, float);
__host__ __device__ float roundf(float);
__host__ __device__ float floorf(float);
__host__ __device__ float ceilf(float);
__device__ float __expf(float);
__device__ float __logf(float);
__device__ float __fdividef(float, float);
__device__ float __frcp_rn(float);
__device__ float __fmaf_rn(float, float, float);
__device__ float __saturatef(float);
template <typename T> __host__ __device__ T min(T, T);
template <typename T> __host__ __device__ T max(T, T);

// ---- runtime API (host side) --------------------------------------------------------
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
typedef cudaError_t cudaError;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t);
template <typename F> cudaError_t cudaFuncSetAttribute(F* func, cudaFuncAttribute attr, int value);
// What clang lowers `k<<<grid, block, smem, stream>>>(...)` to in host compilation.
extern "C" unsigned int __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem = 0,
                                                    cudaStream_t stream = 0);

// ---- the corner of the standard library kernels use -----------------------------------
namespace std {
template <typename T> __host__ __device__ const T& min(const T& a, const T& b);
template <typename T> __host__ __device__ const T& max(const T& a, const T& b);
template <typename A, typename B> inline constexpr bool is_same_v = false;
template <typename A> inline constexpr bool is_same_v<A, A> = true;
template <bool C, typename A, typename B> struct conditional { typedef A type; };
template <typename A, typename B> struct conditional<false, A, B> { typedef B type; };
template <bool C, typename A, typename B> using conditional_t = typename conditional<C, A, B>::type;
}  // namespace std
