// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// ggml's group_norm: each block walks its own group, from `blockIdx.x * group_size +
// threadIdx.x` by the template block size every launch passes. The offset is the same for
// every thread of a block, so the block's threads split [base, end) as threadIdx.x/blockDim.x
// split [0, end): packs are taken from base (aligned there, checked at run time) and the scalar
// loop takes what is left. A start whose offset varies within the block stays refused (L2).
template <int block_size>
__global__ void group_scale(const float* __restrict__ x, float* __restrict__ dst, float* __restrict__ mask, const int group_size, const int ne,
                            const float eps) {
  const int start = blockIdx.x * group_size + threadIdx.x;
  const int end = min(blockIdx.x * group_size + group_size, ne);
  float tmp = 0.0f;
  for (int j = start; j < end; j += block_size) {
    tmp += x[j] * x[j];
  }
  tmp = rsqrtf(tmp + eps);  // (the block reduction of ggml's kernel left out)
  for (int j = start; j < end; j += block_size) {
    dst[j] = x[j] * tmp;
  }
  for (int j = start + threadIdx.y; j < end; j += block_size) {
    mask[j] = 1.0f;
  }
}

void group_scale_cuda(const float* x, float* dst, const int group_size, const int ne, const int groups, const float eps) {
  group_scale<256><<<groups, 256>>>(x, dst, dst + ne, group_size, ne, eps);
}

// CHECK: {{.*}}: remark: [vectorize] L0: rewritten: exposed VEC_L0 {1, 2, 4}; packed 1 pointer(s): x
// CHECK: {{.*}}: remark: [vectorize] L1: rewritten: exposed VEC_L1 {1, 2, 4}; packed 2 pointer(s): dst, x
// CHECK: {{.*}}: remark: [vectorize] L2: skipped: cannot tell that start `start + threadIdx.y` and step `block_size` split the index space between threads (expected threadIdx.x/blockDim.x, a grid stride, a lane, or 0/1)
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
// CHECK: +// Elements from p to the next boundary of N elements (0 where p is on one, or is not even
// CHECK: +// aligned to its element), at most n: the scalar head of a peeled packed loop.
// CHECK: +template <int N, typename T, typename I>
// CHECK: +__device__ __forceinline__ I head(const T* p, I n) {
// CHECK: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// CHECK: +  if (a % sizeof(T) != 0) return I(0);
// CHECK: +  const I h = static_cast<I>((N - (a / sizeof(T)) % N) % N);
// CHECK: +  return h < n ? h : (n > I(0) ? n : I(0));
// CHECK: +}
// CHECK: +
// CHECK: +// Whether n elements from p and n from q share no byte (where the same array through both would
// CHECK: +// break a pack: the body writes through one and then reads or writes through the other).
// CHECK: +template <typename T, typename U>
// CHECK: +__device__ __forceinline__ bool disjoint(const T* p, const U* q, long long n) {
// CHECK: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// CHECK: +  const unsigned long long b = reinterpret_cast<unsigned long long>(q);
// CHECK: +  const unsigned long long m = n > 0 ? static_cast<unsigned long long>(n) : 0ULL;
// CHECK: +  return a + m * sizeof(T) <= b || b + m * sizeof(U) <= a;
// CHECK: +}
// CHECK: +
// CHECK: +// Whether n elements from p and n from q are the same elements or share no byte: where two
// CHECK: +// pointers the kernel indexes alike may alias (no __restrict__), packs are taken only then.
// CHECK: +template <typename T, typename U>
// CHECK: +__device__ __forceinline__ bool apart(const T* p, const U* q, long long n) {
// CHECK: +  const bool same = reinterpret_cast<const void*>(p) == reinterpret_cast<const void*>(q);
// CHECK: +  return (same && sizeof(T) == sizeof(U)) || disjoint(p, q, n);
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
// CHECK: +// group_scale templated by `vectorize`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_VEC_L0
// CHECK: +#define KTX_VEC_L0 1  // vectorize: elements per packed access in loop L0 (1: scalar, as written; x: 4 B)
// CHECK: +#endif
// CHECK: +#ifndef KTX_VEC_L1
// CHECK: +#define KTX_VEC_L1 1  // vectorize: elements per packed access in loop L1 (1: scalar, as written; dst: 4 B, x: 4 B)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_VEC_L0 > 1
// CHECK: +  // VEC_L0: packed accesses where every packed row is aligned (checked here); the
// CHECK: +  // scalar loop after the packed one takes the elements past the last whole pack.
// CHECK: +  const int ktx_packs_L0 = (ktx::aligned<KTX_VEC_L0>(x + ((start) - static_cast<int>(threadIdx.x)))) && end > ((start) - static_cast<int>(threadIdx.x)) ? (end - ((start) - static_cast<int>(threadIdx.x))) / KTX_VEC_L0 : 0;
// CHECK: +  for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L0; ktx_p += block_size) {
// CHECK: +    const auto ktx_x = ktx::load<KTX_VEC_L0>(x + ((start) - static_cast<int>(threadIdx.x)) + ktx_p * KTX_VEC_L0);
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_j = 0; ktx_j < KTX_VEC_L0; ++ktx_j) {
// CHECK: +      tmp += ktx_x.v[ktx_j] * ktx_x.v[ktx_j];
// CHECK: +    }
// CHECK: +  }
// CHECK: +  for (int j = ktx_packs_L0 * KTX_VEC_L0 + start; j < end; j += block_size) {
// CHECK: +    tmp += x[j] * x[j];
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_VEC_L1 > 1
// CHECK: +  // VEC_L1: packed accesses where every packed row is aligned (checked here); the
// CHECK: +  // scalar loop after the packed one takes the elements past the last whole pack.
// CHECK: +  const int ktx_packs_L1 = (ktx::aligned<KTX_VEC_L1>(dst + ((start) - static_cast<int>(threadIdx.x))) &&
// CHECK: +                            ktx::aligned<KTX_VEC_L1>(x + ((start) - static_cast<int>(threadIdx.x)))) && end > ((start) - static_cast<int>(threadIdx.x)) ? (end - ((start) - static_cast<int>(threadIdx.x))) / KTX_VEC_L1 : 0;
// CHECK: +  for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L1; ktx_p += block_size) {
// CHECK: +    ktx::pack<float, KTX_VEC_L1> ktx_dst;
// CHECK: +    const auto ktx_x = ktx::load<KTX_VEC_L1>(x + ((start) - static_cast<int>(threadIdx.x)) + ktx_p * KTX_VEC_L1);
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_j = 0; ktx_j < KTX_VEC_L1; ++ktx_j) {
// CHECK: +      ktx_dst.v[ktx_j] = ktx_x.v[ktx_j] * tmp;
// CHECK: +    }
// CHECK: +    ktx::store(dst + ((start) - static_cast<int>(threadIdx.x)) + ktx_p * KTX_VEC_L1, ktx_dst);
// CHECK: +  }
// CHECK: +  for (int j = ktx_packs_L1 * KTX_VEC_L1 + start; j < end; j += block_size) {
// CHECK: +    dst[j] = x[j] * tmp;
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
