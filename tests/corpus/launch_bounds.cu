// CORPUS: __launch_bounds__ with one and two arguments, with macro and constexpr arguments,
// before and after the return type, on a template kernel and on an extern "C" kernel.
// EXPECT: kernels=lb_one,lb_two,lb_macro,lb_before_type,lb_template,lb_c,no_bounds loops=0
// EXPECT: bounds=lb_one:128,lb_two:256/2,lb_macro:MAX_THREADS/MIN_BLOCKS,lb_before_type:512,lb_template:BLOCK*2/1,lb_c:64,no_bounds:none
// EXPECT: launches=0 warnings=0 errors=0 defines=MAX_THREADS:1024,MIN_BLOCKS:1 constexprs=kBlock:256
#define MAX_THREADS 1024
#define MIN_BLOCKS 1

constexpr int kBlock = 256;

__global__ void __launch_bounds__(128) lb_one(float* x) { x[threadIdx.x] = 0.f; }

__global__ void __launch_bounds__(256, 2) lb_two(float* x) { x[threadIdx.x] = 1.f; }

__global__ void __launch_bounds__(MAX_THREADS, MIN_BLOCKS) lb_macro(float* x) { x[0] = 2.f; }

__global__ __launch_bounds__(512) void lb_before_type(float* x) { x[0] = 3.f; }

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK*2, 1) lb_template(float* x) { x[BLOCK] = 4.f; }

extern "C" __global__ void __launch_bounds__(64) lb_c(float* x) { x[0] = 5.f; }

__global__ void no_bounds(float* x) { x[0] = kBlock; }
