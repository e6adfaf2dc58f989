// RUN: ktx apply --passes rows-per-block %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes rows-per-block %s --config ROWS=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// Blocks walk rows in a grid-stride `while` (row += gridDim.x): with ROWS rows a block, the row
// starts at blockIdx.x * ROWS + threadIdx.y and steps by gridDim.x * ROWS.
__global__ void row_square(float* __restrict__ out, const float* __restrict__ inp, int rows, int C) {
  int row = blockIdx.x;
  while (row < rows) {
    const float* x = inp + row * C;
    float* y = out + row * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
      y[i] = x[i] * x[i];
    }
    row += gridDim.x;
  }
}

void launch_row_square(float* out, const float* inp, int rows, int C) {
  row_square<<<rows / 4, 64>>>(out, inp, rows, C);
}
// The grid keeps its own expression: rows / 4 blocks become (rows / 4) / ROWS blocks of
// ROWS rows each, and the grid-stride loop covers any rows left over, so no row is lost
// whatever the grid; the constraint grid % ROWS == 0 keeps at least one block.

// CHECK: {{.*}}: remark: [rows-per-block] row_square: rewritten: exposed ROWS {1, 2, 4, 8, 16}; the row loop's step gridDim.x (line 13) becomes gridDim.x * ROWS
// CHECK: +// ktx:knobs begin
// CHECK: +// row_square templated by `rows-per-block`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_ROWS
// CHECK: +#define KTX_ROWS 1  // rows-per-block: rows per block, stacked along threadIdx.y (1: one row, as written)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  int row = blockIdx.x;
// CHECK: +  int row = (blockIdx.x * KTX_ROWS + threadIdx.y);
// CHECK: -    row += gridDim.x;
// CHECK: +    row += (gridDim.x * KTX_ROWS);
// CHECK: -  row_square<<<rows / 4, 64>>>(out, inp, rows, C);
// CHECK: +  row_square<<<(rows / 4) / KTX_ROWS, dim3(64, KTX_ROWS)>>>(out, inp, rows, C);
// CONFIG: +// ktx: `rows-per-block` instantiated with ROWS=4
// CONFIG: -  int row = blockIdx.x;
// CONFIG: +  int row = (blockIdx.x * 4 + threadIdx.y);
// CONFIG: -    row += gridDim.x;
// CONFIG: +    row += (gridDim.x * 4);
// CONFIG: -  row_square<<<rows / 4, 64>>>(out, inp, rows, C);
// CONFIG: +  row_square<<<(rows / 4) / 4, dim3(64, 4)>>>(out, inp, rows, C);
