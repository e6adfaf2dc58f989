// RUN: ktx apply --passes rows-per-block %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes rows-per-block %s --config ROWS=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One block per row of d <= 128 elements: rows stack along threadIdx.y, the grid shrinks.
__global__ void add_bias(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ b, int d) {
  const long long row = blockIdx.x;
  for (int i = threadIdx.x; i < d; i += blockDim.x) y[row * d + i] = x[row * d + i] + b[i];
}

void launch_add_bias(float* y, const float* x, const float* b, int rows, int d) {
  dim3 grid(rows);
  dim3 block(d < 128 ? d : 128);
  add_bias<<<grid, block>>>(y, x, b, d);
}

// CHECK: {{.*}}: remark: [rows-per-block] add_bias: rewritten: exposed ROWS {1, 2, 4, 8, 16}
// CHECK: +// ktx:knobs begin
// CHECK: +// add_bias templated by `rows-per-block`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_ROWS
// CHECK: +#define KTX_ROWS 1  // rows-per-block: rows per block, stacked along threadIdx.y (1: one row, as written)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  const long long row = blockIdx.x;
// CHECK: +  const long long row = (blockIdx.x * KTX_ROWS + threadIdx.y);
// CHECK: -  dim3 grid(rows);
// CHECK: -  dim3 block(d < 128 ? d : 128);
// CHECK: +  dim3 grid((rows) / KTX_ROWS);
// CHECK: +  dim3 block(d < 128 ? d : 128, KTX_ROWS);
// CONFIG: +// ktx: `rows-per-block` instantiated with ROWS=4
// CONFIG: -  const long long row = blockIdx.x;
// CONFIG: +  const long long row = (blockIdx.x * 4 + threadIdx.y);
// CONFIG: -  dim3 grid(rows);
// CONFIG: -  dim3 block(d < 128 ? d : 128);
// CONFIG: +  dim3 grid((rows) / 4);
// CONFIG: +  dim3 block(d < 128 ? d : 128, 4);
