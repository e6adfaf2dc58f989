// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes vectorize %s --config VEC_L0=8 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// Row pointers into fp16 tensors: three contiguous accesses become 16-byte packs, with a run-time
// alignment check and the original loop as the scalar tail.
#include <cuda_fp16.h>
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

__global__ void act(__half* __restrict__ out, const __half* __restrict__ in, int d) {
  const long long row = blockIdx.x;
  const __half* __restrict__ x = in + row * 2 * d;
  const __half* __restrict__ y = x + d;
  __half* __restrict__ o = out + row * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float a = __half2float(x[i]);
    o[i] = __float2half(silu(a) * __half2float(y[i]));
  }
}

void launch_act(__half* out, const __half* in, int rows, int d) { act<<<rows, 256>>>(out, in, d); }

// CHECK: {{.*}}: remark: [vectorize] L0: rewritten: exposed VEC_L0 {1, 2, 4, 8}; packed 3 pointer(s): o, x, y
// CHECK: {{.*}}: remark: [vectorize] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
// CHECK: +
// CHECK: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// CHECK: +namespace ktx {
// CHECK: +
// CHECK: +// The unsigned type one access of BYTES bytes moves.
// CHECK: +template <int BYTES> struct word;
// CHECK: +template <> struct word<1> { using type = unsigned char; };
// CHECK: +template <> struct word<2> { using type = unsigned short; };
// CHECK: +template <> struct word<4> { using type = unsigned int; };
// CHECK: +template <> struct word<8> { using type = uint2; };
// CHECK: +template <> struct word<16> { using type = uint4; };
// CHECK: +
// CHECK: +// N elements of T, aligned to their total size so that one instruction moves them.
// CHECK: +template <typename T, int N>
// CHECK: +struct alignas(sizeof(T) * N) pack {
// CHECK: +  T v[N];
// CHECK: +};
// CHECK: +
// CHECK: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// CHECK: +template <int N, typename T>
// CHECK: +__device__ __forceinline__ bool aligned(const T* p) {
// CHECK: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// CHECK: +}
// CHECK: +
// CHECK: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// CHECK: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// CHECK: +  unsigned short r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// CHECK: +  return static_cast<unsigned char>(r);
// CHECK: +}
// CHECK: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// CHECK: +  unsigned short r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// CHECK: +  unsigned int r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// CHECK: +  uint2 r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// CHECK: +  uint4 r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// CHECK: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// CHECK: +      : "l"(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +
// CHECK: +// Any other type of 1 to 16 bytes, through the word of its size.
// CHECK: +template <typename W>
// CHECK: +__device__ __forceinline__ W load_na(const W* p) {
// CHECK: +  using U = typename word<sizeof(W)>::type;
// CHECK: +  const U u = load_na(reinterpret_cast<const U*>(p));
// CHECK: +  return *reinterpret_cast<const W*>(&u);
// CHECK: +}
// CHECK: +
// CHECK: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// CHECK: +// Store HINT: 0 plain, 1 __stcs.
// CHECK: +template <int HINT, typename W>
// CHECK: +__device__ __forceinline__ W load_word(const W* p) {
// CHECK: +  if constexpr (HINT == 1) {
// CHECK: +    return __ldg(p);
// CHECK: +  } else if constexpr (HINT == 2) {
// CHECK: +    return __ldcs(p);
// CHECK: +  } else if constexpr (HINT == 3) {
// CHECK: +    return load_na(p);
// CHECK: +  } else {
// CHECK: +    return *p;
// CHECK: +  }
// CHECK: +}
// CHECK: +template <int HINT, typename W>
// CHECK: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// CHECK: +  if constexpr (HINT == 1) {
// CHECK: +    __stcs(p, x);
// CHECK: +  } else {
// CHECK: +    *p = x;
// CHECK: +  }
// CHECK: +}
// CHECK: +
// CHECK: +// N elements from p (aligned<N>(p) must hold), and back.
// CHECK: +template <int N, int HINT = 0, typename T>
// CHECK: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// CHECK: +  using W = typename word<sizeof(T) * N>::type;
// CHECK: +  pack<T, N> r;
// CHECK: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +template <int HINT = 0, typename T, int N>
// CHECK: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// CHECK: +  using W = typename word<sizeof(T) * N>::type;
// CHECK: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// CHECK: +}
// CHECK: +
// CHECK: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// CHECK: +template <int HINT, typename T>
// CHECK: +__device__ __forceinline__ T ld(const T* p) {
// CHECK: +  using W = typename word<sizeof(T)>::type;
// CHECK: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// CHECK: +  return *reinterpret_cast<const T*>(&w);
// CHECK: +}
// CHECK: +template <int HINT, typename T, typename U>
// CHECK: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// CHECK: +  using W = typename word<sizeof(T)>::type;
// CHECK: +  const T x = value;  // the conversion `*p = value` would make
// CHECK: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// CHECK: +}
// CHECK: +
// CHECK: +}  // namespace ktx
// CHECK: +
// CHECK: +// ktx:knobs begin
// CHECK: +// act templated by `vectorize`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_VEC_L0
// CHECK: +#define KTX_VEC_L0 1  // vectorize: elements per packed access in loop L0 (1: scalar, as written; x: 2 B, o: 2 B, y: 2 B)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_VEC_L0 > 1
// CHECK: +  // VEC_L0: packed accesses where every packed row is aligned (checked here); the
// CHECK: +  // scalar loop after the packed one takes the elements past the last whole pack.
// CHECK: +  const int ktx_packs_L0 = (ktx::aligned<KTX_VEC_L0>(x) &&
// CHECK: +                            ktx::aligned<KTX_VEC_L0>(o) &&
// CHECK: +                            ktx::aligned<KTX_VEC_L0>(y)) ? d / KTX_VEC_L0 : 0;
// CHECK: +  for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L0; ktx_p += blockDim.x) {
// CHECK: +    const auto ktx_x = ktx::load<KTX_VEC_L0>(x + ktx_p * KTX_VEC_L0);
// CHECK: +    ktx::pack<__half, KTX_VEC_L0> ktx_o;
// CHECK: +    const auto ktx_y = ktx::load<KTX_VEC_L0>(y + ktx_p * KTX_VEC_L0);
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_j = 0; ktx_j < KTX_VEC_L0; ++ktx_j) {
// CHECK: +      const float a = __half2float(ktx_x.v[ktx_j]);
// CHECK: +      ktx_o.v[ktx_j] = __float2half(silu(a) * __half2float(ktx_y.v[ktx_j]));
// CHECK: +    }
// CHECK: +    ktx::store(o + ktx_p * KTX_VEC_L0, ktx_o);
// CHECK: +  }
// CHECK: +  for (int i = ktx_packs_L0 * KTX_VEC_L0 + threadIdx.x; i < d; i += blockDim.x) {
// CHECK: +    const float a = __half2float(x[i]);
// CHECK: +    o[i] = __float2half(silu(a) * __half2float(y[i]));
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
// CONFIG: +
// CONFIG: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// CONFIG: +namespace ktx {
// CONFIG: +
// CONFIG: +// The unsigned type one access of BYTES bytes moves.
// CONFIG: +template <int BYTES> struct word;
// CONFIG: +template <> struct word<1> { using type = unsigned char; };
// CONFIG: +template <> struct word<2> { using type = unsigned short; };
// CONFIG: +template <> struct word<4> { using type = unsigned int; };
// CONFIG: +template <> struct word<8> { using type = uint2; };
// CONFIG: +template <> struct word<16> { using type = uint4; };
// CONFIG: +
// CONFIG: +// N elements of T, aligned to their total size so that one instruction moves them.
// CONFIG: +template <typename T, int N>
// CONFIG: +struct alignas(sizeof(T) * N) pack {
// CONFIG: +  T v[N];
// CONFIG: +};
// CONFIG: +
// CONFIG: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// CONFIG: +template <int N, typename T>
// CONFIG: +__device__ __forceinline__ bool aligned(const T* p) {
// CONFIG: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// CONFIG: +}
// CONFIG: +
// CONFIG: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// CONFIG: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// CONFIG: +  unsigned short r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// CONFIG: +  return static_cast<unsigned char>(r);
// CONFIG: +}
// CONFIG: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// CONFIG: +  unsigned short r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// CONFIG: +  unsigned int r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// CONFIG: +  uint2 r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// CONFIG: +  uint4 r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// CONFIG: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// CONFIG: +      : "l"(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +
// CONFIG: +// Any other type of 1 to 16 bytes, through the word of its size.
// CONFIG: +template <typename W>
// CONFIG: +__device__ __forceinline__ W load_na(const W* p) {
// CONFIG: +  using U = typename word<sizeof(W)>::type;
// CONFIG: +  const U u = load_na(reinterpret_cast<const U*>(p));
// CONFIG: +  return *reinterpret_cast<const W*>(&u);
// CONFIG: +}
// CONFIG: +
// CONFIG: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// CONFIG: +// Store HINT: 0 plain, 1 __stcs.
// CONFIG: +template <int HINT, typename W>
// CONFIG: +__device__ __forceinline__ W load_word(const W* p) {
// CONFIG: +  if constexpr (HINT == 1) {
// CONFIG: +    return __ldg(p);
// CONFIG: +  } else if constexpr (HINT == 2) {
// CONFIG: +    return __ldcs(p);
// CONFIG: +  } else if constexpr (HINT == 3) {
// CONFIG: +    return load_na(p);
// CONFIG: +  } else {
// CONFIG: +    return *p;
// CONFIG: +  }
// CONFIG: +}
// CONFIG: +template <int HINT, typename W>
// CONFIG: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// CONFIG: +  if constexpr (HINT == 1) {
// CONFIG: +    __stcs(p, x);
// CONFIG: +  } else {
// CONFIG: +    *p = x;
// CONFIG: +  }
// CONFIG: +}
// CONFIG: +
// CONFIG: +// N elements from p (aligned<N>(p) must hold), and back.
// CONFIG: +template <int N, int HINT = 0, typename T>
// CONFIG: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// CONFIG: +  using W = typename word<sizeof(T) * N>::type;
// CONFIG: +  pack<T, N> r;
// CONFIG: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +template <int HINT = 0, typename T, int N>
// CONFIG: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// CONFIG: +  using W = typename word<sizeof(T) * N>::type;
// CONFIG: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// CONFIG: +}
// CONFIG: +
// CONFIG: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// CONFIG: +template <int HINT, typename T>
// CONFIG: +__device__ __forceinline__ T ld(const T* p) {
// CONFIG: +  using W = typename word<sizeof(T)>::type;
// CONFIG: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// CONFIG: +  return *reinterpret_cast<const T*>(&w);
// CONFIG: +}
// CONFIG: +template <int HINT, typename T, typename U>
// CONFIG: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// CONFIG: +  using W = typename word<sizeof(T)>::type;
// CONFIG: +  const T x = value;  // the conversion `*p = value` would make
// CONFIG: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// CONFIG: +}
// CONFIG: +
// CONFIG: +}  // namespace ktx
// CONFIG: +
// CONFIG: +// ktx: `vectorize` instantiated with VEC_L0=8
// CONFIG: -  for (int i = threadIdx.x; i < d; i += blockDim.x) {
// CONFIG: +  // VEC_L0: packed accesses where every packed row is aligned (checked here); the
// CONFIG: +  // scalar loop after the packed one takes the elements past the last whole pack.
// CONFIG: +  const int ktx_packs_L0 = (ktx::aligned<8>(x) &&
// CONFIG: +                            ktx::aligned<8>(o) &&
// CONFIG: +                            ktx::aligned<8>(y)) ? d / 8 : 0;
// CONFIG: +  for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L0; ktx_p += blockDim.x) {
// CONFIG: +    const auto ktx_x = ktx::load<8>(x + ktx_p * 8);
// CONFIG: +    ktx::pack<__half, 8> ktx_o;
// CONFIG: +    const auto ktx_y = ktx::load<8>(y + ktx_p * 8);
// CONFIG: +#pragma unroll
// CONFIG: +    for (int ktx_j = 0; ktx_j < 8; ++ktx_j) {
// CONFIG: +      const float a = __half2float(ktx_x.v[ktx_j]);
// CONFIG: +      ktx_o.v[ktx_j] = __float2half(silu(a) * __half2float(ktx_y.v[ktx_j]));
// CONFIG: +    }
// CONFIG: +    ktx::store(o + ktx_p * 8, ktx_o);
// CONFIG: +  }
// CONFIG: +  for (int i = ktx_packs_L0 * 8 + threadIdx.x; i < d; i += blockDim.x) {
