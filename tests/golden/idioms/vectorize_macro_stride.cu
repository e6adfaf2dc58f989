// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// The row loop strides by the macro the launch passes as the block size: it is blockDim.x, so
// the threads still split the row between them, and vectorize packs the loads of `in`.
#define BLOCK_SIZE 128

__global__ void row_sum(float* __restrict__ sums, const float* __restrict__ in, int C) {
  __shared__ float partial[BLOCK_SIZE];
  int row = blockIdx.x;
  float acc = 0.f;
  for (int i = threadIdx.x; i < C; i += BLOCK_SIZE) {
    acc += __ldg(&in[row * C + i]);
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int t = 0; t < BLOCK_SIZE; ++t) s += partial[t];
    sums[row] = s;
  }
}

void launch_row_sum(float* sums, const float* in, int rows, int C) {
  row_sum<<<rows, BLOCK_SIZE>>>(sums, in, C);
}
// The packed loop reads whole packs of `in` where the row is aligned, and the scalar loop
// after it takes the elements past the last whole pack; __ldg's load is the pack's element.
// The loop over `partial` is walked by one thread: it packs too (VEC_L1).

// CHECK: {{.*}}: remark: [vectorize] L0: rewritten: exposed VEC_L0 {1, 2, 4}; packed 1 pointer(s): in
// CHECK: {{.*}}: remark: [vectorize] L1: rewritten: exposed VEC_L1 {1, 2, 4}; packed 1 pointer(s): partial
// CHECK: {{.*}}: remark: [vectorize] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
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
// CHECK: +// row_sum templated by `vectorize`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_VEC_L0
// CHECK: +#define KTX_VEC_L0 1  // vectorize: elements per packed access in loop L0 (1: scalar, as written; in: 4 B)
// CHECK: +#endif
// CHECK: +#ifndef KTX_VEC_L1
// CHECK: +#define KTX_VEC_L1 1  // vectorize: elements per packed access in loop L1 (1: scalar, as written; partial: 4 B)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_VEC_L0 > 1
// CHECK: +  // VEC_L0: packed accesses where every packed row is aligned (checked here); the
// CHECK: +  // scalar loop after the packed one takes the elements past the last whole pack.
// CHECK: +  const int ktx_packs_L0 = (ktx::aligned<KTX_VEC_L0>(in + row * C)) ? C / KTX_VEC_L0 : 0;
// CHECK: +  for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L0; ktx_p += BLOCK_SIZE) {
// CHECK: +    const auto ktx_in = ktx::load<KTX_VEC_L0>(in + row * C + ktx_p * KTX_VEC_L0);
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_j = 0; ktx_j < KTX_VEC_L0; ++ktx_j) {
// CHECK: +      acc += ktx_in.v[ktx_j];
// CHECK: +    }
// CHECK: +  }
// CHECK: +  for (int i = ktx_packs_L0 * KTX_VEC_L0 + threadIdx.x; i < C; i += BLOCK_SIZE) {
// CHECK: +    acc += __ldg(&in[row * C + i]);
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_VEC_L1 > 1
// CHECK: +    // VEC_L1: packed accesses where every packed row is aligned (checked here); the
// CHECK: +    // scalar loop after the packed one takes the elements past the last whole pack.
// CHECK: +    const int ktx_packs_L1 = (ktx::aligned<KTX_VEC_L1>(partial)) ? BLOCK_SIZE / KTX_VEC_L1 : 0;
// CHECK: +    for (int ktx_p = 0; ktx_p < ktx_packs_L1; ++ktx_p) {
// CHECK: +      const auto ktx_partial = ktx::load<KTX_VEC_L1>(partial + ktx_p * KTX_VEC_L1);
// CHECK: +#pragma unroll
// CHECK: +      for (int ktx_j = 0; ktx_j < KTX_VEC_L1; ++ktx_j) {
// CHECK: +        s += ktx_partial.v[ktx_j];
// CHECK: +      }
// CHECK: +    }
// CHECK: +    for (int t = ktx_packs_L1 * KTX_VEC_L1 + 0; t < BLOCK_SIZE; ++t) s += partial[t];
// CHECK: +#else
// CHECK: +#endif
