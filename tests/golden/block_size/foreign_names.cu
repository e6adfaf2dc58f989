// RUN: ktx apply --passes block-size %s --kernel scale_ns --config BLOCK_X=128 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=NS
// RUN: ktx apply --passes block-size %s --kernel softcap --config BLOCK_X=128 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=FIELDS
// RUN: ktx apply --passes block-size %s --kernel add2 --config BLOCK_X=128 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=LOOP
// How projects name the block size without blockDim, each read as the launch's block size:
// a namespace-qualified constexpr (dim3 block(opt::threads, 1, 1)), a macro assigned to a
// default-constructed dim3 field by field (block.x = NUM_THREADS), and a grid-stride loop
// macro from a header (CUDA_1D_KERNEL_LOOP, whose expansion reads blockDim and gridDim).
namespace opt {
constexpr int threads = 256;
constexpr int per_block = threads * 4;
}  // namespace opt

__global__ void scale_ns(float* y, int n) {
  const int id = blockIdx.x * opt::per_block + threadIdx.x;
  for (int k = 0; k < 4; ++k)
    if (id + k * opt::threads < n) y[id + k * opt::threads] *= 2.f;
}

void launch_ns(float* y, int n) {
  dim3 block(opt::threads, 1, 1);
  dim3 grid((n + opt::per_block - 1) / opt::per_block);
  scale_ns<<<grid, block>>>(y, n);
}

#define NUM_THREADS 256

__global__ void softcap(float* x, int n, float scale) {
  int idx = blockIdx.x * NUM_THREADS + threadIdx.x;
  if (idx < n) x[idx] = tanhf(x[idx] / scale) * scale;
}

void launch_softcap(float* x, int n, float scale) {
  dim3 blockDim, gridDim;
  blockDim.x = NUM_THREADS;
  gridDim.x = (n + NUM_THREADS - 1) / NUM_THREADS;
  softcap<<<gridDim, blockDim>>>(x, n, scale);
}

__global__ void add2(float* out, const float* a, const float* b, int n) {
  CUDA_1D_KERNEL_LOOP(j, n)
  {
    out[j] = a[j] + b[j];
  }
}

void launch_add2(float* out, const float* a, const float* b, int n, int sms) {
  dim3 block_dim = 512;
  add2<<<sms * 4, block_dim>>>(out, a, b, n);
}

// NS: {{.*}}: remark: [block-size] scale_ns: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}; threads (constexpr, line 9) is the launch's block size and the kernel's: its value is the knob, so the grid, the block and the kernel follow it
// NS: +// ktx: `block-size` instantiated with BLOCK_X=128
// NS: -constexpr int threads = 256;
// NS: +constexpr int threads = 128;
// NS: -__global__ void scale_ns(float* y, int n) {
// NS: +__global__ void __launch_bounds__(128) scale_ns(float* y, int n) {
// FIELDS: {{.*}}: remark: [block-size] softcap: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}; NUM_THREADS (define, line 25) is the launch's block size and the kernel's: its value is the knob, so the grid, the block and the kernel follow it; launch mapping: 256 -> BLOCK_X in grid[0], block[0]
// FIELDS: -#define NUM_THREADS 256
// FIELDS: +// ktx: `block-size` instantiated with BLOCK_X=128
// FIELDS: +#define NUM_THREADS 128
// FIELDS: -__global__ void softcap(float* x, int n, float scale) {
// FIELDS: +__global__ void __launch_bounds__(128) softcap(float* x, int n, float scale) {
// LOOP: {{.*}}: remark: [block-size] add2: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}; launch mapping: 512 -> BLOCK_X in block[0]
// LOOP: -__global__ void add2(float* out, const float* a, const float* b, int n) {
// LOOP: +// ktx: `block-size` instantiated with BLOCK_X=128
// LOOP: +__global__ void __launch_bounds__(128) add2(float* out, const float* a, const float* b, int n) {
// LOOP: -  dim3 block_dim = 512;
// LOOP: +  dim3 block_dim = 128;
