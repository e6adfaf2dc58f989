// RUN: ktx apply --passes split %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes split %s --config SPLIT=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// Blocks walk rows in a grid-stride `while`; inside, the threads walk the row with a stride
// written as the macro the launch passes as the block: the index analysis reads it as blockDim.x.
#define BLOCK_SIZE 128

__global__ void rows_scale(float* __restrict__ out, const float* __restrict__ inp,
                           const float* __restrict__ w, int rows, int C) {
  int row = blockIdx.x;
  while (row < rows) {
    const float* x = inp + row * C;
    float* y = out + row * C;
    for (int i = threadIdx.x; i < C; i += BLOCK_SIZE) {
      y[i] = __ldg(&x[i]) * w[i];
    }
    row += gridDim.x;
  }
}

void launch_rows_scale(float* out, const float* inp, const float* w, int rows, int C) {
  rows_scale<<<rows < 1024 ? rows : 1024, BLOCK_SIZE>>>(out, inp, w, rows, C);
}

// CHECK: {{.*}}: remark: [split] rows_scale: rewritten: exposed SPLIT {1, 2, 4, 8, 16, 32}; row loops L1 interleave over gridDim.y
// CHECK: +// ktx:knobs begin
// CHECK: +// rows_scale templated by `split`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_SPLIT
// CHECK: +#define KTX_SPLIT 1  // split: blocks per row (grid y); 1: one block walks the row
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -    for (int i = threadIdx.x; i < C; i += BLOCK_SIZE) {
// CHECK: +    for (int i = blockIdx.y * BLOCK_SIZE + threadIdx.x; i < C; i += BLOCK_SIZE * gridDim.y) {
// CHECK: -  rows_scale<<<rows < 1024 ? rows : 1024, BLOCK_SIZE>>>(out, inp, w, rows, C);
// CHECK: +  rows_scale<<<dim3(rows < 1024 ? rows : 1024, KTX_SPLIT), BLOCK_SIZE>>>(out, inp, w, rows, C);
// CONFIG: +// ktx: `split` instantiated with SPLIT=4
// CONFIG: -    for (int i = threadIdx.x; i < C; i += BLOCK_SIZE) {
// CONFIG: +    for (int i = blockIdx.y * BLOCK_SIZE + threadIdx.x; i < C; i += BLOCK_SIZE * gridDim.y) {
// CONFIG: -  rows_scale<<<rows < 1024 ? rows : 1024, BLOCK_SIZE>>>(out, inp, w, rows, C);
// CONFIG: +  rows_scale<<<dim3(rows < 1024 ? rows : 1024, 4), BLOCK_SIZE>>>(out, inp, w, rows, C);
