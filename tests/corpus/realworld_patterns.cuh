// CORPUS: small self-written reproductions of what broke on real serving-library files:
// a block comment inside a multi-line #define (tree-sitter ends the body there), a trailing
// // comment after a #define value, __align__(alignof(T)) on extern shared memory, a
// function-pointer template parameter, reference-returning members behind an attribute
// macro, a qualified template launch split over two lines, a macro invocation without a
// semicolon right before a kernel (it used to swallow the kernel; now masked as a file-scope
// macro invocation, no warning), and a type name as a macro argument (a warning outside kernels).
// EXPECT: kernels=act_kernel,softmax_kernel,registered_kernel loops=2 launches=2
// EXPECT: launch_kernels=act_kernel,act_kernel launch_macros=LAUNCH_ACT,- warnings=1 errors=0
// EXPECT: defines=VEC_BYTES:16,KTX_BLOCK:256 shared=smem
#define KTX_FI_INLINE inline __attribute__((always_inline)) __device__
#define VEC_BYTES 16  // one 128-bit access
#define KTX_BLOCK 256 /* threads */

namespace ktx_rw {

template <typename T, int N>
struct vec_t {
  T data[N];
  KTX_FI_INLINE T& operator[](int i) { return data[i]; }
  KTX_FI_INLINE const T& operator[](int i) const { return data[i]; }
};

KTX_FI_INLINE float silu(const float& x) { return x / (1.f + __expf(-x)); }

template <typename T, float (*Activation)(const float&)>
__global__ void act_kernel(T* __restrict__ out, const T* __restrict__ in, int d) {
  constexpr int kVec = VEC_BYTES / sizeof(T);
  for (int i = threadIdx.x; i < d / kVec; i += blockDim.x) {
    vec_t<T, kVec> v;
    out[i] = static_cast<T>(Activation(static_cast<float>(in[i])) + v[0]);
  }
}

struct TempStorage {
  float max_val;
  float denom;
};

template <int BLOCK>
__global__ void softmax_kernel(float* logits, int d) {
  extern __shared__ __align__(alignof(TempStorage)) unsigned char smem[];
  auto& storage = reinterpret_cast<TempStorage&>(smem);
  for (int i = threadIdx.x; i < d; i += BLOCK) logits[i] = __expf(logits[i] - storage.max_val);
}

}  // namespace ktx_rw

#define LAUNCH_ACT(T)                                                        \
  do {                                                                       \
    /* one launch per dtype; keep in sync with the Python bindings */        \
    ktx_rw::act_kernel<T, ktx_rw::silu><<<rows, KTX_BLOCK, 0, stream>>>(out, \
                                                                   in, d);   \
  } while (0)

#define KTX_REGISTER(name, dtype) static const int name##_id = 0

KTX_REGISTER(act, float)

__global__ void registered_kernel(int* x) { x[0] = 1; }

void launch(float* out, const float* in, int rows, int d, cudaStream_t stream) {
  LAUNCH_ACT(float);
  ktx_rw::act_kernel<float, ktx_rw::silu>
      <<<rows, KTX_BLOCK, 0, stream>>>(out, in, d);
  CHECK_TYPE(out, int8_t);
}
