// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes block-size %s --config BLOCK_X=256 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// The block size is a macro: the launch passes it as the block and the kernel strides by it
// (and sizes shared memory with it). It *is* blockDim.x, so its value becomes the knob.
#define BLOCK_SIZE 128

__global__ void row_normalize(float* out, const float* in, int rows, int C) {
  __shared__ float partial[BLOCK_SIZE];
  int row = blockIdx.x;
  float acc = 0.f;
  for (int i = threadIdx.x; i < C; i += BLOCK_SIZE) {
    acc += in[row * C + i];
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int t = 0; t < BLOCK_SIZE; ++t) total += partial[t];
    partial[0] = total;
  }
  __syncthreads();
  float scale = 1.f / partial[0];
  for (int i = threadIdx.x; i < C; i += BLOCK_SIZE) {
    out[row * C + i] = in[row * C + i] * scale;
  }
}

void launch_row_normalize(float* out, const float* in, int rows, int C) {
  row_normalize<<<rows, BLOCK_SIZE>>>(out, in, rows, C);
}

// CHECK: {{.*}}: remark: [block-size] row_normalize: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}; BLOCK_SIZE (define, line 5) is the launch's block size and the kernel's: its value is the knob, so the grid, the block and the kernel follow it; launch mapping: 128 -> BLOCK_X in block[0]
// CHECK: -#define BLOCK_SIZE 128
// CHECK: +// ktx:knobs begin
// CHECK: +// row_normalize templated by `block-size`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK_X
// CHECK: +#define KTX_BLOCK_X 0  // block-size: threads per block along x (0: as the original, now 128); BLOCK_SIZE follows
// CHECK: +#endif
// CHECK: +#ifndef KTX_PICK  // the knob, or the original expression when the knob is 0
// CHECK: +#define KTX_PICK(knob, original) ((knob) ? (knob) : original)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#define BLOCK_SIZE KTX_PICK(KTX_BLOCK_X, (128))
// CHECK: -__global__ void row_normalize(float* out, const float* in, int rows, int C) {
// CHECK: +__global__ void __launch_bounds__(KTX_BLOCK_X) row_normalize(float* out, const float* in, int rows, int C) {
// CONFIG: -#define BLOCK_SIZE 128
// CONFIG: +// ktx: `block-size` instantiated with BLOCK_X=256
// CONFIG: +#define BLOCK_SIZE 256
// CONFIG: -__global__ void row_normalize(float* out, const float* in, int rows, int C) {
// CONFIG: +__global__ void __launch_bounds__(256) row_normalize(float* out, const float* in, int rows, int C) {
