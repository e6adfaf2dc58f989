// RUN: ktx apply --passes vectorize %s --kernel matadd --config VEC_THREAD=4 --diff -q | filecheck %s --match-full-lines --check-prefix=ADD
// RUN: ktx apply --passes vectorize %s --kernel matscale --config VEC_THREAD=2 --diff -q | filecheck %s --match-full-lines --check-prefix=SCALE
// One element per thread on a 2-D grid (cuda-samples and course kernels write matrix sums this
// way): x is the element, y the row. The guard's other condition (row < M) joins the packed
// path's check, the row's offset joins the alignment check, and only the grid's x shrinks.
__global__ void matadd(float* C, const float* A, const float* B, int M, int N) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    C[row * N + col] = A[row * N + col] + B[row * N + col];
  }
}

__global__ void matscale(float* C, const float* A, int M, int N) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  C[row * N + col] = 2.f * A[row * N + col];
}

void launch(float* C, const float* A, const float* B, int M, int N) {
  dim3 block(16, 16);
  dim3 grid((N + 15) / 16, (M + 15) / 16);
  matadd<<<grid, block>>>(C, A, B, M, N);
  matscale<<<grid, block>>>(C, A, M, N);
}

// ADD: +
// ADD: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// ADD: +namespace ktx {
// ADD: +
// ADD: +// The unsigned type one access of BYTES bytes moves.
// ADD: +template <int BYTES> struct word;
// ADD: +template <> struct word<1> { using type = unsigned char; };
// ADD: +template <> struct word<2> { using type = unsigned short; };
// ADD: +template <> struct word<4> { using type = unsigned int; };
// ADD: +template <> struct word<8> { using type = uint2; };
// ADD: +template <> struct word<16> { using type = uint4; };
// ADD: +
// ADD: +// N elements of T, aligned to their total size so that one instruction moves them.
// ADD: +template <typename T, int N>
// ADD: +struct alignas(sizeof(T) * N) pack {
// ADD: +  T v[N];
// ADD: +};
// ADD: +
// ADD: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// ADD: +template <int N, typename T>
// ADD: +__device__ __forceinline__ bool aligned(const T* p) {
// ADD: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// ADD: +}
// ADD: +
// ADD: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// ADD: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// ADD: +  unsigned short r;
// ADD: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// ADD: +  return static_cast<unsigned char>(r);
// ADD: +}
// ADD: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// ADD: +  unsigned short r;
// ADD: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// ADD: +  return r;
// ADD: +}
// ADD: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// ADD: +  unsigned int r;
// ADD: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// ADD: +  return r;
// ADD: +}
// ADD: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// ADD: +  uint2 r;
// ADD: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// ADD: +  return r;
// ADD: +}
// ADD: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// ADD: +  uint4 r;
// ADD: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// ADD: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// ADD: +      : "l"(p));
// ADD: +  return r;
// ADD: +}
// ADD: +
// ADD: +// Any other type of 1 to 16 bytes, through the word of its size.
// ADD: +template <typename W>
// ADD: +__device__ __forceinline__ W load_na(const W* p) {
// ADD: +  using U = typename word<sizeof(W)>::type;
// ADD: +  const U u = load_na(reinterpret_cast<const U*>(p));
// ADD: +  return *reinterpret_cast<const W*>(&u);
// ADD: +}
// ADD: +
// ADD: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// ADD: +// Store HINT: 0 plain, 1 __stcs.
// ADD: +template <int HINT, typename W>
// ADD: +__device__ __forceinline__ W load_word(const W* p) {
// ADD: +  if constexpr (HINT == 1) {
// ADD: +    return __ldg(p);
// ADD: +  } else if constexpr (HINT == 2) {
// ADD: +    return __ldcs(p);
// ADD: +  } else if constexpr (HINT == 3) {
// ADD: +    return load_na(p);
// ADD: +  } else {
// ADD: +    return *p;
// ADD: +  }
// ADD: +}
// ADD: +template <int HINT, typename W>
// ADD: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// ADD: +  if constexpr (HINT == 1) {
// ADD: +    __stcs(p, x);
// ADD: +  } else {
// ADD: +    *p = x;
// ADD: +  }
// ADD: +}
// ADD: +
// ADD: +// N elements from p (aligned<N>(p) must hold), and back.
// ADD: +template <int N, int HINT = 0, typename T>
// ADD: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// ADD: +  using W = typename word<sizeof(T) * N>::type;
// ADD: +  pack<T, N> r;
// ADD: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// ADD: +  return r;
// ADD: +}
// ADD: +template <int HINT = 0, typename T, int N>
// ADD: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// ADD: +  using W = typename word<sizeof(T) * N>::type;
// ADD: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// ADD: +}
// ADD: +
// ADD: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// ADD: +template <int HINT, typename T>
// ADD: +__device__ __forceinline__ T ld(const T* p) {
// ADD: +  using W = typename word<sizeof(T)>::type;
// ADD: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// ADD: +  return *reinterpret_cast<const T*>(&w);
// ADD: +}
// ADD: +template <int HINT, typename T, typename U>
// ADD: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// ADD: +  using W = typename word<sizeof(T)>::type;
// ADD: +  const T x = value;  // the conversion `*p = value` would make
// ADD: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// ADD: +}
// ADD: +
// ADD: +}  // namespace ktx
// ADD: +
// ADD: +// ktx: `vectorize` instantiated with VEC_THREAD=4
// ADD: -  int col = blockIdx.x * blockDim.x + threadIdx.x;
// ADD: +  // VEC_THREAD: each thread takes VEC_THREAD consecutive elements, packed where
// ADD: +  // every packed pointer is aligned and the pack is in bounds (checked here), else
// ADD: +  // one by one.
// ADD: +  const int ktx_p = blockIdx.x * blockDim.x + threadIdx.x;
// ADD: -  if (row < M && col < N) {
// ADD: -    C[row * N + col] = A[row * N + col] + B[row * N + col];
// ADD: +  if (row < M &&
// ADD: +      ktx::aligned<4>(C + row * N) &&
// ADD: +      ktx::aligned<4>(A + row * N) &&
// ADD: +      ktx::aligned<4>(B + row * N) &&
// ADD: +      ktx_p * 4 + 4 <= N) {
// ADD: +    ktx::pack<float, 4> ktx_C;
// ADD: +    const auto ktx_A = ktx::load<4>(A + row * N + ktx_p * 4);
// ADD: +    const auto ktx_B = ktx::load<4>(B + row * N + ktx_p * 4);
// ADD: +#pragma unroll
// ADD: +    for (int ktx_j = 0; ktx_j < 4; ++ktx_j) {
// ADD: +      ktx_C.v[ktx_j] = ktx_A.v[ktx_j] + ktx_B.v[ktx_j];
// ADD: +    }
// ADD: +    ktx::store(C + row * N + ktx_p * 4, ktx_C);
// ADD: +  } else {
// ADD: +    for (int ktx_j = 0; ktx_j < 4; ++ktx_j) {
// ADD: +      const int col = ktx_p * 4 + ktx_j;
// ADD: +      if (row < M && col < N) {
// ADD: +        C[row * N + col] = A[row * N + col] + B[row * N + col];
// ADD: +      }
// ADD: +    }
// ADD: -  dim3 grid((N + 15) / 16, (M + 15) / 16);
// ADD: +  dim3 grid(((N + 15) / 16 + 3) / 4, (M + 15) / 16);
// SCALE: +
// SCALE: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// SCALE: +namespace ktx {
// SCALE: +
// SCALE: +// The unsigned type one access of BYTES bytes moves.
// SCALE: +template <int BYTES> struct word;
// SCALE: +template <> struct word<1> { using type = unsigned char; };
// SCALE: +template <> struct word<2> { using type = unsigned short; };
// SCALE: +template <> struct word<4> { using type = unsigned int; };
// SCALE: +template <> struct word<8> { using type = uint2; };
// SCALE: +template <> struct word<16> { using type = uint4; };
// SCALE: +
// SCALE: +// N elements of T, aligned to their total size so that one instruction moves them.
// SCALE: +template <typename T, int N>
// SCALE: +struct alignas(sizeof(T) * N) pack {
// SCALE: +  T v[N];
// SCALE: +};
// SCALE: +
// SCALE: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// SCALE: +template <int N, typename T>
// SCALE: +__device__ __forceinline__ bool aligned(const T* p) {
// SCALE: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// SCALE: +}
// SCALE: +
// SCALE: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// SCALE: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// SCALE: +  unsigned short r;
// SCALE: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// SCALE: +  return static_cast<unsigned char>(r);
// SCALE: +}
// SCALE: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// SCALE: +  unsigned short r;
// SCALE: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// SCALE: +  return r;
// SCALE: +}
// SCALE: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// SCALE: +  unsigned int r;
// SCALE: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// SCALE: +  return r;
// SCALE: +}
// SCALE: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// SCALE: +  uint2 r;
// SCALE: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// SCALE: +  return r;
// SCALE: +}
// SCALE: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// SCALE: +  uint4 r;
// SCALE: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// SCALE: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// SCALE: +      : "l"(p));
// SCALE: +  return r;
// SCALE: +}
// SCALE: +
// SCALE: +// Any other type of 1 to 16 bytes, through the word of its size.
// SCALE: +template <typename W>
// SCALE: +__device__ __forceinline__ W load_na(const W* p) {
// SCALE: +  using U = typename word<sizeof(W)>::type;
// SCALE: +  const U u = load_na(reinterpret_cast<const U*>(p));
// SCALE: +  return *reinterpret_cast<const W*>(&u);
// SCALE: +}
// SCALE: +
// SCALE: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// SCALE: +// Store HINT: 0 plain, 1 __stcs.
// SCALE: +template <int HINT, typename W>
// SCALE: +__device__ __forceinline__ W load_word(const W* p) {
// SCALE: +  if constexpr (HINT == 1) {
// SCALE: +    return __ldg(p);
// SCALE: +  } else if constexpr (HINT == 2) {
// SCALE: +    return __ldcs(p);
// SCALE: +  } else if constexpr (HINT == 3) {
// SCALE: +    return load_na(p);
// SCALE: +  } else {
// SCALE: +    return *p;
// SCALE: +  }
// SCALE: +}
// SCALE: +template <int HINT, typename W>
// SCALE: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// SCALE: +  if constexpr (HINT == 1) {
// SCALE: +    __stcs(p, x);
// SCALE: +  } else {
// SCALE: +    *p = x;
// SCALE: +  }
// SCALE: +}
// SCALE: +
// SCALE: +// N elements from p (aligned<N>(p) must hold), and back.
// SCALE: +template <int N, int HINT = 0, typename T>
// SCALE: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// SCALE: +  using W = typename word<sizeof(T) * N>::type;
// SCALE: +  pack<T, N> r;
// SCALE: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// SCALE: +  return r;
// SCALE: +}
// SCALE: +template <int HINT = 0, typename T, int N>
// SCALE: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// SCALE: +  using W = typename word<sizeof(T) * N>::type;
// SCALE: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// SCALE: +}
// SCALE: +
// SCALE: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// SCALE: +template <int HINT, typename T>
// SCALE: +__device__ __forceinline__ T ld(const T* p) {
// SCALE: +  using W = typename word<sizeof(T)>::type;
// SCALE: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// SCALE: +  return *reinterpret_cast<const T*>(&w);
// SCALE: +}
// SCALE: +template <int HINT, typename T, typename U>
// SCALE: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// SCALE: +  using W = typename word<sizeof(T)>::type;
// SCALE: +  const T x = value;  // the conversion `*p = value` would make
// SCALE: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// SCALE: +}
// SCALE: +
// SCALE: +}  // namespace ktx
// SCALE: +
// SCALE: +// ktx: `vectorize` instantiated with VEC_THREAD=2
// SCALE: -  const int col = blockIdx.x * blockDim.x + threadIdx.x;
// SCALE: -  if (row >= M || col >= N) return;
// SCALE: -  C[row * N + col] = 2.f * A[row * N + col];
// SCALE: +  // VEC_THREAD: each thread takes VEC_THREAD consecutive elements, packed where
// SCALE: +  // every packed pointer is aligned and the pack is in bounds (checked here), else
// SCALE: +  // one by one.
// SCALE: +  const int ktx_p = blockIdx.x * blockDim.x + threadIdx.x;
// SCALE: +  if (!(row >= M) &&
// SCALE: +      ktx::aligned<2>(C + row * N) &&
// SCALE: +      ktx::aligned<2>(A + row * N) &&
// SCALE: +      ktx_p * 2 + 2 <= N) {
// SCALE: +    ktx::pack<float, 2> ktx_C;
// SCALE: +    const auto ktx_A = ktx::load<2>(A + row * N + ktx_p * 2);
// SCALE: +#pragma unroll
// SCALE: +    for (int ktx_j = 0; ktx_j < 2; ++ktx_j) {
// SCALE: +      ktx_C.v[ktx_j] = 2.f * ktx_A.v[ktx_j];
// SCALE: +    }
// SCALE: +    ktx::store(C + row * N + ktx_p * 2, ktx_C);
// SCALE: +  } else {
// SCALE: +    for (int ktx_j = 0; ktx_j < 2; ++ktx_j) {
// SCALE: +      const int col = ktx_p * 2 + ktx_j;
// SCALE: +      if (row >= M || col >= N) continue;
// SCALE: +      C[row * N + col] = 2.f * A[row * N + col];
// SCALE: +    }
// SCALE: +  }
// SCALE: -  dim3 grid((N + 15) / 16, (M + 15) / 16);
// SCALE: +  dim3 grid(((N + 15) / 16 + 1) / 2, (M + 15) / 16);
