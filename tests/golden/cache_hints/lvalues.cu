// RUN: ktx apply --passes cache-hints %s 2>&1 -o /dev/null | filecheck %s --match-full-lines --check-prefix=REMARKS
// RUN: ktx apply --passes cache-hints %s --config CACHE_LD_IN=1 CACHE_ST_OUT=1 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// Elements used as lvalues stay lvalues: an address taken through parentheses (`&(in[i])`),
// a non-const reference bound to an element (`float& r = out[i]`, `bump(out[i])` with
// `bump(float&)`). A store through parentheses is hinted. Memory reached through a volatile
// pointer is never hinted (the cast in ktx::st would drop volatile, and an nc load of memory
// another thread writes is undefined).
__device__ void bump(float& r) { r += 1.f; }

__global__ void addr(float* __restrict__ out, const float* __restrict__ in, volatile int* flag, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* p = &(in[i]);
  float& r = out[i];
  r = *p * 2.f;
  bump(out[i]);
  (out[i]) = in[i] + 1.f;
  flag[0] = 1;
  if (flag[1]) out[i] = 0.f;
}

// REMARKS: {{.*}}: remark: [cache-hints] flag:load: skipped: loads of flag go through a volatile pointer (line 10): a cache policy would drop volatile (every access must reach memory as written)
// REMARKS: {{.*}}: remark: [cache-hints] flag:store: skipped: stores of flag go through a volatile pointer (line 10): a cache policy would drop volatile (every access must reach memory as written)
// REMARKS: {{.*}}: remark: [cache-hints] in:load: rewritten: exposed CACHE_LD_IN {0, 1, 2, 3}; 1 access(es)
// REMARKS: {{.*}}: remark: [cache-hints] out:store: rewritten: exposed CACHE_ST_OUT {0, 1}; 2 access(es)
// REMARKS: {{.*}}: remark: [cache-hints] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
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
// CONFIG: +// Elements from p to the next boundary of N elements (0 where p is on one, or is not even
// CONFIG: +// aligned to its element), at most n: the scalar head of a peeled packed loop.
// CONFIG: +template <int N, typename T, typename I>
// CONFIG: +__device__ __forceinline__ I head(const T* p, I n) {
// CONFIG: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// CONFIG: +  if (a % sizeof(T) != 0) return I(0);
// CONFIG: +  const I h = static_cast<I>((N - (a / sizeof(T)) % N) % N);
// CONFIG: +  return h < n ? h : (n > I(0) ? n : I(0));
// CONFIG: +}
// CONFIG: +
// CONFIG: +// Whether n elements from p and n from q share no byte (where the same array through both would
// CONFIG: +// break a pack: the body writes through one and then reads or writes through the other).
// CONFIG: +template <typename T, typename U>
// CONFIG: +__device__ __forceinline__ bool disjoint(const T* p, const U* q, long long n) {
// CONFIG: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// CONFIG: +  const unsigned long long b = reinterpret_cast<unsigned long long>(q);
// CONFIG: +  const unsigned long long m = n > 0 ? static_cast<unsigned long long>(n) : 0ULL;
// CONFIG: +  return a + m * sizeof(T) <= b || b + m * sizeof(U) <= a;
// CONFIG: +}
// CONFIG: +
// CONFIG: +// Whether n elements from p and n from q are the same elements or share no byte: where two
// CONFIG: +// pointers the kernel indexes alike may alias (no __restrict__), packs are taken only then.
// CONFIG: +template <typename T, typename U>
// CONFIG: +__device__ __forceinline__ bool apart(const T* p, const U* q, long long n) {
// CONFIG: +  const bool same = reinterpret_cast<const void*>(p) == reinterpret_cast<const void*>(q);
// CONFIG: +  return (same && sizeof(T) == sizeof(U)) || disjoint(p, q, n);
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
// CONFIG: +// ktx: `cache-hints` instantiated with CACHE_LD_IN=1, CACHE_ST_OUT=1
// CONFIG: -  (out[i]) = in[i] + 1.f;
// CONFIG: +  ktx::st<1>(&(out[i]), ktx::ld<1>(&in[i]) + 1.f);
// CONFIG: -  if (flag[1]) out[i] = 0.f;
// CONFIG: +  if (flag[1]) ktx::st<1>(&out[i], 0.f);
