// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes block-size %s --config BLOCK_X=512 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One element per thread with the block size as a macro, in the index and at the launch (grid
// and block): the macro's value becomes the knob, and the grid follows it.
#define BLOCK_SIZE 128

__global__ void residual(float* out, const float* a, const float* b, int N) {
  int idx = blockIdx.x * BLOCK_SIZE + threadIdx.x;
  if (idx < N) {
    out[idx] = __ldg(&a[idx]) + __ldg(&b[idx]);
  }
}

void launch_residual(float* out, const float* a, const float* b, int N) {
  const int grid = (N + BLOCK_SIZE - 1) / BLOCK_SIZE;
  residual<<<grid, BLOCK_SIZE>>>(out, a, b, N);
}
// The kernel never reads blockDim: before the index analysis, block-size refused it for that.
// Now BLOCK_SIZE is the launch's block and the kernel's stride, so it is blockDim.x, and one
// knob moves all three uses.

// CHECK: {{.*}}: remark: [block-size] residual: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}; BLOCK_SIZE (define, line 5) is the launch's block size and the kernel's: its value is the knob, so the grid, the block and the kernel follow it; launch mapping: 128 -> BLOCK_X in block[0], vars.grid
// CHECK: -#define BLOCK_SIZE 128
// CHECK: +// ktx:knobs begin
// CHECK: +// residual templated by `block-size`.
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
// CHECK: -__global__ void residual(float* out, const float* a, const float* b, int N) {
// CHECK: +__global__ void __launch_bounds__(KTX_BLOCK_X) residual(float* out, const float* a, const float* b, int N) {
// CONFIG: -#define BLOCK_SIZE 128
// CONFIG: +// ktx: `block-size` instantiated with BLOCK_X=512
// CONFIG: +#define BLOCK_SIZE 512
// CONFIG: -__global__ void residual(float* out, const float* a, const float* b, int N) {
// CONFIG: +__global__ void __launch_bounds__(512) residual(float* out, const float* a, const float* b, int N) {
