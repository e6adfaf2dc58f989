// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes block-size %s --config BLOCK_Y=8 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// A llama.cpp-style variadic launch helper: the kernel is its first argument, the launch
// geometry sits in a params struct the caller fills. The helper forwards the struct's fields.
struct launch_params {
  dim3 grid_dim;
  dim3 block_dim;
  size_t smem;
  cudaStream_t stream;
};

template <typename Kernel, typename... Args>
void launch(Kernel kernel, const launch_params& params, Args... args) {
  kernel<<<params.grid_dim, params.block_dim, params.smem, params.stream>>>(args...);
}

__global__ void row_sum(float* out, const float* in, int rows, int cols) {
  int r = blockIdx.x * blockDim.y + threadIdx.y;
  if (r >= rows) return;
  float acc = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += in[r * cols + c];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
  if (threadIdx.x == 0) out[r] = acc;
}

void run_row_sum(float* out, const float* in, int rows, int cols, cudaStream_t s) {
  launch_params params;
  params.block_dim = dim3(32, 4);
  params.grid_dim = dim3((rows + 3) / 4);
  params.smem = 0;
  params.stream = s;
  launch(row_sum, params, out, in, rows, cols);
}

// CHECK: {{.*}}: remark: [block-size] row_sum: rewritten: exposed BLOCK_Y {0, 1, 2, 4, 8, 16, 32}; x stays 32: the kernel shuffles across the lanes of a warp along x; launch mapping: 4 -> BLOCK_Y in grid[0], block[1]
// CHECK: -__global__ void row_sum(float* out, const float* in, int rows, int cols) {
// CHECK: +// ktx:knobs begin
// CHECK: +// row_sum templated by `block-size`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK_Y
// CHECK: +#define KTX_BLOCK_Y 0  // block-size: threads per block along y (0: as the original, now 4)
// CHECK: +#endif
// CHECK: +#ifndef KTX_PICK  // the knob, or the original expression when the knob is 0
// CHECK: +#define KTX_PICK(knob, original) ((knob) ? (knob) : original)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +__global__ void __launch_bounds__(32 * KTX_BLOCK_Y) row_sum(float* out, const float* in, int rows, int cols) {
// CHECK: -  params.block_dim = dim3(32, 4);
// CHECK: +  params.block_dim = dim3(32, KTX_PICK(KTX_BLOCK_Y, (4)));
// CONFIG: -__global__ void row_sum(float* out, const float* in, int rows, int cols) {
// CONFIG: +// ktx: `block-size` instantiated with BLOCK_Y=8
// CONFIG: +__global__ void __launch_bounds__(256) row_sum(float* out, const float* in, int rows, int cols) {
// CONFIG: -  params.block_dim = dim3(32, 4);
// CONFIG: +  params.block_dim = dim3(32, 8);
