// CORPUS: kernels in nested namespaces, an anonymous namespace, a C++17 nested namespace
// definition (a::b), extern "C" on one kernel and on a block of two, using-directives,
// qualified launches (outer::inner::k<<<...>>>) and a launch from inside a namespace.
// EXPECT: kernels=nested_k,anon_k,cxx17_k,c_single,c_block_a,c_block_b device=helper loops=0
// EXPECT: launches=4 launch_kernels=cxx17_k,nested_k,anon_k,c_single warnings=0 errors=0
namespace outer {
namespace inner {
__device__ float helper(float x) { return x + 1.f; }
template <typename T>
__global__ void nested_k(T* x) { x[threadIdx.x] = helper(x[threadIdx.x]); }
}  // namespace inner
}  // namespace outer

namespace {
__global__ void anon_k(int* x) { x[0] = 1; }
}  // namespace

namespace a::b {
__global__ void cxx17_k(int* x) { x[0] = 2; }
void launch_here(int* x) { cxx17_k<<<1, 1>>>(x); }
}  // namespace a::b

extern "C" __global__ void c_single(float* x) { x[0] = 3.f; }

extern "C" {
__global__ void c_block_a(float* x) { x[0] = 4.f; }
__global__ void c_block_b(float* x) { x[0] = 5.f; }
}

using namespace outer;

void launch_all(float* f, int* i) {
  inner::nested_k<float><<<2, 64>>>(f);
  anon_k<<<1, 32>>>(i);
  c_single<<<1, 1>>>(f);
}
