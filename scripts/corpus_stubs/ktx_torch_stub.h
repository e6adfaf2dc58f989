// ktx corpus sweep: a stand-in for the parts of PyTorch's C++ API that CUDA extension files
// use in their host code (tensors, dtypes, dispatch macros, streams, checks). Written for the
// compile check of scripts/sweep_corpus.py: it must make the *original* file compile so that a
// rewrite of its kernels can be judged; it never runs. Device-side types map to CUDA's own
// (at::Half is __half, at::BFloat16 is __nv_bfloat16).
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <cstddef>
#include <optional>
#include <string>
#include <sstream>
#include <tuple>
#include <vector>
#include <initializer_list>
#include <stdexcept>
#include <limits>
#include <type_traits>
#include <utility>
#include <functional>
#include <memory>
#include <cmath>
#include <mutex>
#include <ostream>

#define KTX_STUB_TORCH 1
#define TORCH_VERSION_MAJOR 2
#define TORCH_VERSION_MINOR 5
#define TORCH_VERSION_PATCH 0

namespace c10 {
// Half and BFloat16 convert to and from float and CUDA's own types, and define their mixed
// arithmetic explicitly (as c10 does), so that `h + 1.0f` is not ambiguous.
#define KTX_STUB_HALF_LIKE(NAME, CUDA_T, TO_F, FROM_F)                                              \
  struct alignas(2) NAME {                                                                         \
    unsigned short x = 0;                                                                          \
    NAME() = default;                                                                              \
    __host__ __device__ NAME(float f) { CUDA_T h = FROM_F(f); x = *reinterpret_cast<unsigned short*>(&h); } \
    __host__ __device__ NAME(const CUDA_T& h) { x = *reinterpret_cast<const unsigned short*>(&h); } \
    __host__ __device__ operator float() const { return TO_F(*reinterpret_cast<const CUDA_T*>(&x)); } \
    __host__ __device__ operator CUDA_T() const { return *reinterpret_cast<const CUDA_T*>(&x); }  \
  };                                                                                               \
  inline __host__ __device__ NAME operator+(NAME a, NAME b) { return float(a) + float(b); }          \
  inline __host__ __device__ NAME operator-(NAME a, NAME b) { return float(a) - float(b); }          \
  inline __host__ __device__ NAME operator*(NAME a, NAME b) { return float(a) * float(b); }          \
  inline __host__ __device__ NAME operator/(NAME a, NAME b) { return float(a) / float(b); }          \
  inline __host__ __device__ NAME operator-(NAME a) { return -float(a); }                            \
  inline __host__ __device__ NAME& operator+=(NAME& a, NAME b) { return a = a + b; }                 \
  inline __host__ __device__ NAME& operator-=(NAME& a, NAME b) { return a = a - b; }                 \
  inline __host__ __device__ NAME& operator*=(NAME& a, NAME b) { return a = a * b; }                 \
  inline __host__ __device__ NAME& operator/=(NAME& a, NAME b) { return a = a / b; }                 \
  inline __host__ __device__ bool operator<(NAME a, NAME b) { return float(a) < float(b); }          \
  inline __host__ __device__ bool operator>(NAME a, NAME b) { return float(a) > float(b); }          \
  inline __host__ __device__ bool operator==(NAME a, NAME b) { return float(a) == float(b); }        \
  KTX_STUB_MIXED(NAME, float, float) KTX_STUB_MIXED(NAME, double, double)                          \
  KTX_STUB_MIXED_INT(NAME, int) KTX_STUB_MIXED_INT(NAME, int64_t)
// c10 (Half-inl.h): Half op int is Half (`a * static_cast<Half>(b)`), not float, so that
// `welford_merge_element(count, mean, m2n, n, mean_new, var * n)` deduces one T (apex).
#define KTX_STUB_MIXED_INT(NAME, OTHER)                                                            \
  inline __host__ __device__ NAME operator+(NAME a, OTHER b) { return NAME(float(a) + float(b)); } \
  inline __host__ __device__ NAME operator-(NAME a, OTHER b) { return NAME(float(a) - float(b)); } \
  inline __host__ __device__ NAME operator*(NAME a, OTHER b) { return NAME(float(a) * float(b)); } \
  inline __host__ __device__ NAME operator/(NAME a, OTHER b) { return NAME(float(a) / float(b)); } \
  inline __host__ __device__ NAME operator+(OTHER a, NAME b) { return NAME(float(a) + float(b)); } \
  inline __host__ __device__ NAME operator-(OTHER a, NAME b) { return NAME(float(a) - float(b)); } \
  inline __host__ __device__ NAME operator*(OTHER a, NAME b) { return NAME(float(a) * float(b)); } \
  inline __host__ __device__ NAME operator/(OTHER a, NAME b) { return NAME(float(a) / float(b)); } \
  inline __host__ __device__ bool operator<(NAME a, OTHER b) { return float(a) < float(b); }       \
  inline __host__ __device__ bool operator>(NAME a, OTHER b) { return float(a) > float(b); }       \
  inline __host__ __device__ bool operator<(OTHER a, NAME b) { return float(a) < float(b); }       \
  inline __host__ __device__ bool operator>(OTHER a, NAME b) { return float(a) > float(b); }
#define KTX_STUB_MIXED(NAME, OTHER, R)                                                             \
  inline __host__ __device__ R operator+(NAME a, OTHER b) { return R(float(a)) + R(b); }           \
  inline __host__ __device__ R operator-(NAME a, OTHER b) { return R(float(a)) - R(b); }           \
  inline __host__ __device__ R operator*(NAME a, OTHER b) { return R(float(a)) * R(b); }           \
  inline __host__ __device__ R operator/(NAME a, OTHER b) { return R(float(a)) / R(b); }           \
  inline __host__ __device__ R operator+(OTHER a, NAME b) { return R(a) + R(float(b)); }           \
  inline __host__ __device__ R operator-(OTHER a, NAME b) { return R(a) - R(float(b)); }           \
  inline __host__ __device__ R operator*(OTHER a, NAME b) { return R(a) * R(float(b)); }           \
  inline __host__ __device__ R operator/(OTHER a, NAME b) { return R(a) / R(float(b)); }           \
  inline __host__ __device__ bool operator<(NAME a, OTHER b) { return R(float(a)) < R(b); }        \
  inline __host__ __device__ bool operator>(NAME a, OTHER b) { return R(float(a)) > R(b); }        \
  inline __host__ __device__ bool operator<(OTHER a, NAME b) { return R(a) < R(float(b)); }        \
  inline __host__ __device__ bool operator>(OTHER a, NAME b) { return R(a) > R(float(b)); }
KTX_STUB_HALF_LIKE(Half, __half, __half2float, __float2half)
KTX_STUB_HALF_LIKE(BFloat16, __nv_bfloat16, __bfloat162float, __float2bfloat16)

template <class T> struct complex {
  T real_ = T(), imag_ = T();
  constexpr __host__ __device__ complex(T re = T(), T im = T()) : real_(re), imag_(im) {}
  constexpr __host__ __device__ T real() const { return real_; }
  constexpr __host__ __device__ T imag() const { return imag_; }
  __host__ __device__ complex& operator+=(const complex& o) { real_ += o.real_; imag_ += o.imag_; return *this; }
  __host__ __device__ complex& operator*=(const complex& o) { return *this = *this * o; }
  friend __host__ __device__ complex operator+(complex a, complex b) { return {a.real_ + b.real_, a.imag_ + b.imag_}; }
  friend __host__ __device__ complex operator-(complex a, complex b) { return {a.real_ - b.real_, a.imag_ - b.imag_}; }
  friend __host__ __device__ complex operator*(complex a, complex b) {
    return {a.real_ * b.real_ - a.imag_ * b.imag_, a.real_ * b.imag_ + a.imag_ * b.real_};
  }
  friend __host__ __device__ complex operator*(complex a, T b) { return {a.real_ * b, a.imag_ * b}; }
  friend __host__ __device__ complex operator*(T a, complex b) { return {a * b.real_, a * b.imag_}; }
};
template <class T> __host__ __device__ complex<T> exp(const complex<T>& z) {
  T e = ::exp(z.real_);
  return {e * ::cos(z.imag_), e * ::sin(z.imag_)};
}
template <class T> __host__ __device__ complex<T> conj(const complex<T>& z) { return {z.real_, -z.imag_}; }
}  // namespace c10
namespace std {  // c10 lets std::conj and std::exp take its complex
using c10::conj;
using c10::exp;
}  // namespace std
namespace c10 {
template <class T> using optional = std::optional<T>;
using std::nullopt;
struct Float8_e4m3fn { unsigned char x; };
struct Float8_e5m2 { unsigned char x; };

enum class ScalarType : int8_t {
  Byte, Char, Short, Int, Long, Half, Float, Double, ComplexHalf, ComplexFloat, ComplexDouble,
  Bool, QInt8, QUInt8, QInt32, BFloat16, Float8_e5m2, Float8_e4m3fn, UInt16, UInt32, UInt64,
  Undefined
};
inline const char* toString(ScalarType) { return "dtype"; }
inline std::ostream& operator<<(std::ostream& os, ScalarType) { return os << "dtype"; }
inline size_t elementSize(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: case ScalarType::Char: case ScalarType::Bool: return 1;
    case ScalarType::Half: case ScalarType::BFloat16: case ScalarType::Short: return 2;
    case ScalarType::Double: case ScalarType::Long: return 8;
    default: return 4;
  }
}
template <class T> struct CppTypeToScalarType { static constexpr ScalarType value = ScalarType::Float; };

struct Device {
  int index_ = 0;
  Device() = default;
  template <class... A> Device(A&&...) {}
  int index() const { return index_; }
  bool is_cuda() const { return true; }
  bool is_cpu() const { return false; }
  int type() const { return 1; }
  std::string str() const { return "cuda"; }
};
enum class DeviceType : int8_t { CPU, CUDA };
using DeviceIndex = int8_t;
constexpr DeviceType kCUDA = DeviceType::CUDA;
constexpr DeviceType kCPU = DeviceType::CPU;

template <class T> struct ArrayRef {
  std::vector<T> v;
  ArrayRef() = default;
  ArrayRef(std::initializer_list<T> l) : v(l) {}
  ArrayRef(const std::vector<T>& x) : v(x) {}
  ArrayRef(const T* p, size_t n) : v(p, p + n) {}
  size_t size() const { return v.size(); }
  const T* data() const { return v.data(); }
  T operator[](size_t i) const { return v[i]; }
  const T* begin() const { return v.data(); }
  const T* end() const { return v.data() + v.size(); }
  std::vector<T> vec() const { return v; }
  bool empty() const { return v.empty(); }
  T front() const { return v.front(); }
  T back() const { return v.back(); }
  operator std::vector<T>() const { return v; }
};
using IntArrayRef = ArrayRef<int64_t>;

struct Scalar {
  double v = 0;
  Scalar() = default;
  template <class T> Scalar(T x) : v(static_cast<double>(x)) {}
  template <class T> T to() const { return static_cast<T>(v); }
  double toDouble() const { return v; }
  float toFloat() const { return static_cast<float>(v); }
  int64_t toLong() const { return static_cast<int64_t>(v); }
};

struct TensorOptions {
  TensorOptions() = default;
  template <class... A> TensorOptions(A&&...) {}
  template <class... A> TensorOptions dtype(A&&...) const { return *this; }
  template <class... A> TensorOptions device(A&&...) const { return *this; }
  template <class... A> TensorOptions layout(A&&...) const { return *this; }
  template <class... A> TensorOptions requires_grad(A&&...) const { return *this; }
  template <class... A> TensorOptions memory_format(A&&...) const { return *this; }
  template <class... A> TensorOptions pinned_memory(A&&...) const { return *this; }
  ScalarType scalar_type() const { return ScalarType::Float; }
  Device get_device() const { return {}; }
};

struct TypeMeta {
  ScalarType t = ScalarType::Float;
  size_t itemsize() const { return elementSize(t); }
  operator ScalarType() const { return t; }
  ScalarType toScalarType() const { return t; }
  std::string name() const { return "dtype"; }
  bool operator==(ScalarType o) const { return t == o; }
  bool operator!=(ScalarType o) const { return t != o; }
  bool operator==(const TypeMeta& o) const { return t == o.t; }
  bool operator!=(const TypeMeta& o) const { return t != o.t; }
};

struct Storage { void* data() const { return nullptr; } size_t nbytes() const { return 0; } };
struct Layout {};
struct MemoryFormat { static constexpr int Contiguous = 0; static constexpr int ChannelsLast = 1; };

class Tensor {
 public:
  Tensor() = default;
  template <class T = void> T* data_ptr() const { return nullptr; }
  template <class T = void> const T* const_data_ptr() const { return nullptr; }
  template <class T = void> T* mutable_data_ptr() const { return nullptr; }
  template <class T> T item() const { return T(); }
  template <class T> T* data() const { return nullptr; }
  Scalar item() const { return {}; }
  int64_t size(int64_t) const { return 1; }
  int64_t stride(int64_t) const { return 1; }
  IntArrayRef sizes() const { return {}; }
  IntArrayRef strides() const { return {}; }
  int64_t numel() const { return 1; }
  int64_t dim() const { return 1; }
  int64_t ndimension() const { return 1; }
  int64_t element_size() const { return 4; }
  int64_t itemsize() const { return 4; }
  size_t nbytes() const { return 4; }
  int64_t storage_offset() const { return 0; }
  ScalarType scalar_type() const { return ScalarType::Float; }
  ScalarType scalarType() const { return ScalarType::Float; }
  TypeMeta dtype() const { return {}; }
  TensorOptions options() const { return {}; }
  Device device() const { return {}; }
  int get_device() const { return 0; }
  bool is_cuda() const { return true; }
  bool is_cpu() const { return false; }
  bool defined() const { return true; }
  bool is_contiguous(...) const { return true; }
  bool requires_grad() const { return false; }
  Tensor& type() { return *this; }
  const Tensor& type() const { return *this; }
  bool is_cuda_type() const { return true; }
  Storage storage() const { return {}; }
  template <class... A> Tensor contiguous(A&&...) const { return *this; }
  template <class... A> Tensor to(A&&...) const { return *this; }
  template <class... A> Tensor view(A&&...) const { return *this; }
  template <class... A> Tensor reshape(A&&...) const { return *this; }
  template <class... A> Tensor narrow(A&&...) const { return *this; }
  template <class... A> Tensor slice(A&&...) const { return *this; }
  template <class... A> Tensor select(A&&...) const { return *this; }
  template <class... A> Tensor index(A&&...) const { return *this; }
  template <class... A> Tensor transpose(A&&...) const { return *this; }
  template <class... A> Tensor permute(A&&...) const { return *this; }
  template <class... A> Tensor unsqueeze(A&&...) const { return *this; }
  template <class... A> Tensor squeeze(A&&...) const { return *this; }
  template <class... A> Tensor expand(A&&...) const { return *this; }
  template <class... A> Tensor flatten(A&&...) const { return *this; }
  template <class... A> Tensor sum(A&&...) const { return *this; }
  template <class... A> Tensor mean(A&&...) const { return *this; }
  template <class... A> Tensor clone(A&&...) const { return *this; }
  template <class... A> Tensor detach(A&&...) const { return *this; }
  template <class... A> Tensor view_as(A&&...) const { return *this; }
  template <class... A> Tensor new_empty(A&&...) const { return *this; }
  template <class... A> Tensor new_zeros(A&&...) const { return *this; }
  template <class... A> Tensor float_(A&&...) const { return *this; }
  template <class... A> Tensor toType(A&&...) const { return *this; }
  template <class... A> Tensor t(A&&...) const { return *this; }
  template <class... A> Tensor cuda(A&&...) const { return *this; }
  template <class... A> Tensor cpu(A&&...) const { return *this; }
  template <class... A> Tensor half(A&&...) const { return *this; }
  template <class... A> Tensor bfloat16(A&&...) const { return *this; }
  template <class... A> Tensor mul(A&&...) const { return *this; }
  template <class... A> Tensor add(A&&...) const { return *this; }
  template <class... A> Tensor masked_fill(A&&...) const { return *this; }
  template <class... A> Tensor& copy_(A&&...) { return *this; }
  template <class... A> Tensor& zero_(A&&...) { return *this; }
  template <class... A> Tensor& fill_(A&&...) { return *this; }
  template <class... A> Tensor& resize_(A&&...) { return *this; }
  template <class... A> Tensor& add_(A&&...) { return *this; }
  template <class... A> Tensor& mul_(A&&...) { return *this; }
  template <class... A> Tensor& div_(A&&...) { return *this; }
  template <class... A> Tensor& index_put_(A&&...) { return *this; }
  Tensor operator[](int64_t) const { return *this; }
  Tensor operator-() const { return *this; }
  template <class T> Tensor operator+(const T&) const { return *this; }
  template <class T> Tensor operator-(const T&) const { return *this; }
  template <class T> Tensor operator*(const T&) const { return *this; }
  template <class T> Tensor operator/(const T&) const { return *this; }
  template <class T> Tensor& operator+=(const T&) { return *this; }
  template <class T> Tensor& operator*=(const T&) { return *this; }
  std::string toString() const { return "Tensor"; }
};
using TensorList = ArrayRef<Tensor>;
inline std::optional<Device> device_of(const Tensor&) { return Device(); }
using OptionalTensorRef = const std::optional<Tensor>&;

struct Stream {
  cudaStream_t s = nullptr;
  cudaStream_t stream() const { return s; }
  operator cudaStream_t() const { return s; }
  int device_index() const { return 0; }
  Device device() const { return {}; }
  void synchronize() const {}
};

template <class T> struct Optional : std::optional<T> { using std::optional<T>::optional; };

#define C10_HOST_DEVICE __host__ __device__
#define C10_DEVICE __device__
#define C10_HOST __host__
#define C10_WARP_SIZE 32
#define C10_LAUNCH_BOUNDS_0 __launch_bounds__(256, 4)
#define C10_LAUNCH_BOUNDS_1(max_threads_per_block) __launch_bounds__((max_threads_per_block))
#define C10_LAUNCH_BOUNDS_2(a, b) __launch_bounds__((a), (b))
#define C10_UNLIKELY(x) (x)
#define C10_LIKELY(x) (x)
#define C10_ALWAYS_INLINE inline
#define C10_API
#define C10_EXPORT
#define C10_CUDA_CHECK(expr) ((void)(expr))
#define C10_CUDA_KERNEL_LAUNCH_CHECK() ((void)0)
#define C10_CUDA_CHECK_WARN(expr) ((void)(expr))
}  // namespace c10

namespace at {
using namespace c10;
using c10::Half;
using c10::BFloat16;
using c10::ScalarType;
using c10::Tensor;
using c10::IntArrayRef;
using c10::TensorList;
using c10::TensorOptions;
using c10::Device;
using c10::Scalar;
using Float = float;
using Double = double;
constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kChar = ScalarType::Char;
constexpr ScalarType kShort = ScalarType::Short;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kInt32 = ScalarType::Int;
constexpr ScalarType kLong = ScalarType::Long;
constexpr ScalarType kInt64 = ScalarType::Long;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kFloat32 = ScalarType::Float;
constexpr ScalarType kFloat16 = ScalarType::Half;
constexpr ScalarType kDouble = ScalarType::Double;
constexpr ScalarType kBool = ScalarType::Bool;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
constexpr ScalarType kUInt8 = ScalarType::Byte;
constexpr ScalarType kInt8 = ScalarType::Char;
constexpr ScalarType kFloat8_e4m3fn = ScalarType::Float8_e4m3fn;
constexpr ScalarType kFloat8_e5m2 = ScalarType::Float8_e5m2;

// The size comes first and may be a braced list: a non-deduced first parameter takes it.
template <class... A> Tensor empty(IntArrayRef, A&&...) { return {}; }
template <class... A> Tensor zeros(IntArrayRef, A&&...) { return {}; }
template <class... A> Tensor ones(IntArrayRef, A&&...) { return {}; }
template <class... A> Tensor full(IntArrayRef, A&&...) { return {}; }
template <class... A> Tensor randn(IntArrayRef, A&&...) { return {}; }
template <class... A> Tensor empty_strided(IntArrayRef, IntArrayRef, A&&...) { return {}; }
template <class... A> Tensor empty_like(const Tensor&, A&&...) { return {}; }
template <class... A> Tensor zeros_like(const Tensor&, A&&...) { return {}; }
template <class... A> Tensor ones_like(const Tensor&, A&&...) { return {}; }
template <class... A> Tensor arange(A&&...) { return {}; }
template <class... A> Tensor cat(A&&...) { return {}; }
template <class... A> Tensor stack(A&&...) { return {}; }
template <class... A> Tensor matmul(A&&...) { return {}; }
template <class... A> Tensor mm(A&&...) { return {}; }
template <class... A> Tensor from_blob(A&&...) { return {}; }
inline size_t elementSize(ScalarType t) { return c10::elementSize(t); }
inline TensorOptions device(...) { return {}; }
inline TensorOptions dtype(...) { return {}; }

template <class T, bool is_cuda = true> struct AccumulateTypeDevice { using type = float; };
template <> struct AccumulateTypeDevice<double, true> { using type = double; };
template <class T, bool is_cuda = true> using acc_type = typename AccumulateTypeDevice<T, is_cuda>::type;
template <class T> struct numeric_limits {
  static __host__ __device__ T lowest() { return std::numeric_limits<T>::lowest(); }
  static __host__ __device__ T max() { return std::numeric_limits<T>::max(); }
  static __host__ __device__ T min() { return std::numeric_limits<T>::min(); }
  static __host__ __device__ T infinity() { return std::numeric_limits<T>::infinity(); }
};
template <> struct numeric_limits<Half> {
  static __host__ __device__ Half lowest() { return __ushort_as_half(0xfbff); }
  static __host__ __device__ Half max() { return __ushort_as_half(0x7bff); }
  static __host__ __device__ Half infinity() { return __ushort_as_half(0x7c00); }
};
template <> struct numeric_limits<BFloat16> {
  static __host__ __device__ BFloat16 lowest() { return __ushort_as_bfloat16(0xff7f); }
  static __host__ __device__ BFloat16 max() { return __ushort_as_bfloat16(0x7f7f); }
  static __host__ __device__ BFloat16 infinity() { return __ushort_as_bfloat16(0x7f80); }
};

struct PhiloxCudaState {
  PhiloxCudaState() = default;
  PhiloxCudaState(uint64_t, uint64_t) {}
  uint64_t seed_ = 0, offset_ = 0;
};
struct CUDAGeneratorImpl {
  std::mutex mutex_;
  PhiloxCudaState philox_cuda_state(uint64_t) { return {}; }
  std::pair<uint64_t, uint64_t> philox_engine_inputs(uint64_t) { return {0, 0}; }
};
struct Generator {
  template <class T> T* get() const { return nullptr; }
  std::mutex& mutex() const { static std::mutex m; return m; }
};
template <class T, class... A> T* get_generator_or_default(A&&...) { return nullptr; }

namespace cuda {
using c10::Stream;
using CUDAStream = c10::Stream;
inline CUDAStream getCurrentCUDAStream(int = -1) { return {}; }
inline CUDAStream getDefaultCUDAStream(int = -1) { return {}; }
inline CUDAStream getStreamFromPool(bool = false, int = -1) { return {}; }
inline cudaDeviceProp* getCurrentDeviceProperties() { static cudaDeviceProp p{}; return &p; }
inline cudaDeviceProp* getDeviceProperties(int) { static cudaDeviceProp p{}; return &p; }
inline int current_device() { return 0; }
inline int getNumGPUs() { return 1; }
inline void* getCurrentCUDABlasHandle() { return nullptr; }
inline void* getCurrentCUDABlasLtHandle() { return nullptr; }
struct CUDAStreamGuard { template <class... A> CUDAStreamGuard(A&&...) {} };
struct OptionalCUDAGuard { template <class... A> OptionalCUDAGuard(A&&...) {} };
struct CUDAGuard { template <class... A> CUDAGuard(A&&...) {} };
namespace detail {
inline bool canUse32BitIndexMath(const Tensor&, int64_t = 0) { return true; }
inline Generator getDefaultCUDAGenerator(int = -1) { return {}; }
}  // namespace detail
namespace philox {
inline __host__ __device__ std::tuple<uint64_t, uint64_t> unpack(PhiloxCudaState s) { return {s.seed_, s.offset_}; }
}  // namespace philox
}  // namespace cuda
using cuda::OptionalCUDAGuard;
namespace native {}
}  // namespace at

// ATen/cuda/Atomic.cuh and DeviceUtils.cuh define these at global scope.
template <class T, class U> __device__ inline void gpuAtomicAdd(T* p, U v) { atomicAdd(p, static_cast<T>(v)); }
__device__ inline void gpuAtomicAdd(c10::Half* p, c10::Half v) { atomicAdd(reinterpret_cast<__half*>(p), __half(v)); }
__device__ inline void gpuAtomicAdd(c10::BFloat16* p, c10::BFloat16 v) {
  atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __nv_bfloat16(v));
}
template <class T, class U> __device__ inline void fastAtomicAdd(T* p, int64_t i, int64_t, U v, bool) { gpuAtomicAdd(p + i, v); }
template <class T> __device__ inline T WARP_SHFL(T v, int lane, int width = 32, unsigned mask = 0xffffffffu) {
  return __shfl_sync(mask, v, lane, width);
}
template <class T> __device__ inline T WARP_SHFL_XOR(T v, int m, int width = 32, unsigned mask = 0xffffffffu) {
  return __shfl_xor_sync(mask, v, m, width);
}
template <class T> __device__ inline T WARP_SHFL_DOWN(T v, unsigned d, int width = 32, unsigned mask = 0xffffffffu) {
  return __shfl_down_sync(mask, v, d, width);
}
template <class T> __device__ inline T WARP_SHFL_UP(T v, unsigned d, int width = 32, unsigned mask = 0xffffffffu) {
  return __shfl_up_sync(mask, v, d, width);
}
__device__ inline unsigned WARP_BALLOT(int p, unsigned mask = 0xffffffffu) { return __ballot_sync(mask, p); }

namespace c10 { namespace cuda {
using at::cuda::CUDAStream;
using at::cuda::CUDAGuard;
using at::cuda::OptionalCUDAGuard;
using at::cuda::CUDAStreamGuard;
using at::cuda::getCurrentCUDAStream;
using at::cuda::getDefaultCUDAStream;
using at::cuda::getStreamFromPool;
inline int current_device() { return 0; }
namespace CUDACachingAllocator { inline void* raw_alloc(size_t) { return nullptr; } inline void raw_delete(void*) {} }
}}  // namespace c10::cuda

namespace torch {
using namespace at;
using at::Tensor;
using Dtype = at::ScalarType;
using at::kFloat; using at::kHalf; using at::kBFloat16; using at::kInt; using at::kLong; using at::kUInt8;
using at::kInt8; using at::kFloat32; using at::kFloat16; using at::kByte; using at::kDouble; using at::kBool;
using at::empty; using at::zeros; using at::ones; using at::full; using at::empty_like; using at::zeros_like;
using at::ones_like; using at::arange; using at::from_blob;
namespace indexing { struct Slice { template <class... A> Slice(A&&...) {} }; constexpr int None = 0; }
}  // namespace torch

#define TORCH_CHECK(cond, ...) ((void)(cond))
#define TORCH_CHECK_EQ(a, b, ...) ((void)((a) == (b)))
#define TORCH_CHECK_LE(a, b, ...) ((void)((a) <= (b)))
#define TORCH_CHECK_GE(a, b, ...) ((void)((a) >= (b)))
#define TORCH_CHECK_LT(a, b, ...) ((void)((a) < (b)))
#define TORCH_CHECK_GT(a, b, ...) ((void)((a) > (b)))
#define TORCH_CHECK_NOT_IMPLEMENTED(cond, ...) ((void)(cond))
#define TORCH_INTERNAL_ASSERT(cond, ...) ((void)(cond))
#define TORCH_WARN(...) ((void)0)
#define AT_ASSERT(cond, ...) ((void)(cond))
#define AT_ASSERTM(cond, ...) ((void)(cond))
#define AT_ERROR(...) throw std::runtime_error("error")
#define AT_CUDA_CHECK(expr) ((void)(expr))
#define CUDA_KERNEL_ASSERT(cond) ((void)(cond))

// Dispatch: the body runs with the first listed type (scalar_t), enough to instantiate it.
#define AT_PRIVATE_CASE_TYPE(enum_type, type, ...) \
  case enum_type: { using scalar_t = type; return __VA_ARGS__(); }
#define AT_DISPATCH_CASE(enum_type, ...) case enum_type: { using scalar_t = float; return __VA_ARGS__(); }
#define AT_DISPATCH_SWITCH(TYPE, NAME, ...) [&] { switch (TYPE) { __VA_ARGS__ default: break; } }()
#define KTX_STUB_DISPATCH(T, ...) [&] { using scalar_t = T; return __VA_ARGS__(); }()
#define AT_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...) KTX_STUB_DISPATCH(float, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES_AND_HALF(TYPE, NAME, ...) KTX_STUB_DISPATCH(float, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES_AND(S, TYPE, NAME, ...) KTX_STUB_DISPATCH(float, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES_AND2(S1, S2, TYPE, NAME, ...) KTX_STUB_DISPATCH(float, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES(TYPE, NAME, ...) KTX_STUB_DISPATCH(float, __VA_ARGS__)
#define AT_DISPATCH_ALL_TYPES(TYPE, NAME, ...) KTX_STUB_DISPATCH(float, __VA_ARGS__)
#define AT_DISPATCH_ALL_TYPES_AND(S, TYPE, NAME, ...) KTX_STUB_DISPATCH(float, __VA_ARGS__)
#define AT_DISPATCH_INTEGRAL_TYPES(TYPE, NAME, ...) KTX_STUB_DISPATCH(int, __VA_ARGS__)
#define AT_DISPATCH_REDUCED_FLOATING_TYPES(TYPE, NAME, ...) KTX_STUB_DISPATCH(at::Half, __VA_ARGS__)

#define TORCH_EXTENSION_NAME ktx_stub_ext
namespace pybind11 {
struct module_ {
  template <class... A> module_& def(A&&...) { return *this; }
  template <class... A> module_ def_submodule(A&&...) { return *this; }
};
using module = module_;
template <class... A> int arg(A&&...) { return 0; }
struct gil_scoped_release {};
}  // namespace pybind11
namespace py = pybind11;
#define PYBIND11_MODULE(name, m) static void ktx_stub_pybind_##name(pybind11::module_& m)
#define TORCH_LIBRARY(ns, m) static void ktx_stub_torch_library_##ns(ktx_stub_library& m)
#define TORCH_LIBRARY_FRAGMENT(ns, m) static void ktx_stub_torch_fragment_##ns(ktx_stub_library& m)
#define TORCH_LIBRARY_IMPL(ns, k, m) static void ktx_stub_torch_impl_##ns##_##k(ktx_stub_library& m)
struct ktx_stub_library {
  template <class... A> ktx_stub_library& def(A&&...) { return *this; }
  template <class... A> ktx_stub_library& impl(A&&...) { return *this; }
};
