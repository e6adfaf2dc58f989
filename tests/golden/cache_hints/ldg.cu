// RUN: ktx apply --passes cache-hints %s --diff 2>&1 | filecheck %s --match-full-lines
// One element per thread, read through __ldg and written through __stcs: both are accesses of
// their memory like any other, and the knobs default to the policies the original wrote.
__global__ void gelu_ldg(float* __restrict__ out, const float* __restrict__ inp, int N) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) {
    float xi = __ldg(&inp[i]);
    __stcs(&out[i], 0.5f * xi * (1.f + tanhf(0.79788456f * xi)));
  }
}

// CHECK: {{.*}}: remark: [cache-hints] inp:load: rewritten: exposed CACHE_LD_INP {0, 1, 2, 3}; default 1: the original's __ldg; 1 access(es)
// CHECK: {{.*}}: remark: [cache-hints] out:store: rewritten: exposed CACHE_ST_OUT {0, 1}; default 1: the original's __stcs; 1 access(es)
// CHECK: {{.*}}: remark: [cache-hints] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
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
// CHECK: +// gelu_ldg templated by `cache-hints`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_CACHE_LD_INP
// CHECK: +#define KTX_CACHE_LD_INP 1  // cache-hints: cache policy of loads from inp: 0 plain, 1 __ldg, 2 __ldcs, 3 nc no-L1
// CHECK: +#endif
// CHECK: +#ifndef KTX_CACHE_ST_OUT
// CHECK: +#define KTX_CACHE_ST_OUT 1  // cache-hints: cache policy of stores to out: 0 plain, 1 __stcs
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -    float xi = __ldg(&inp[i]);
// CHECK: -    __stcs(&out[i], 0.5f * xi * (1.f + tanhf(0.79788456f * xi)));
// CHECK: +    float xi = ktx::ld<KTX_CACHE_LD_INP>(&inp[i]);
// CHECK: +    ktx::st<KTX_CACHE_ST_OUT>(&out[i], 0.5f * xi * (1.f + tanhf(0.79788456f * xi)));
