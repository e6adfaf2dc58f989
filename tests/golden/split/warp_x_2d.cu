// RUN: ktx apply --passes split %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes split %s --config SPLIT=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// A warp per row under a 2-D block (x = WARP_SIZE, y = rows of the block), the row walked by
// `col += WARP_SIZE`: every launch's block x is WARP_SIZE, so it is a block-stride row loop,
// and split spreads it over gridDim.y (start blockIdx.y * WARP_SIZE, step WARP_SIZE * gridDim.y).
#define WARP_SIZE 32

__global__ void add_rows(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ dst,
                         const int ncols, const int nrows) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= nrows) return;
  for (int col = threadIdx.x; col < ncols; col += WARP_SIZE) {
    dst[row * ncols + col] = x[row * ncols + col] + y[row * ncols + col];
  }
}

void add_rows_cuda(const float* x, const float* y, float* dst, const int ncols, const int nrows, cudaStream_t stream) {
  const dim3 block_dims(WARP_SIZE, 8, 1);
  add_rows<<<dim3((nrows + 7) / 8, 1, 1), block_dims, 0, stream>>>(x, y, dst, ncols, nrows);
}

// CHECK: {{.*}}: remark: [split] add_rows: rewritten: exposed SPLIT {1, 2, 4, 8, 16, 32}; row loops L0 interleave over gridDim.y
// CHECK: +// ktx:knobs begin
// CHECK: +// add_rows templated by `split`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_SPLIT
// CHECK: +#define KTX_SPLIT 1  // split: blocks per row (grid y); 1: one block walks the row
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  for (int col = threadIdx.x; col < ncols; col += WARP_SIZE) {
// CHECK: +  for (int col = blockIdx.y * WARP_SIZE + threadIdx.x; col < ncols; col += WARP_SIZE * gridDim.y) {
// CHECK: -  add_rows<<<dim3((nrows + 7) / 8, 1, 1), block_dims, 0, stream>>>(x, y, dst, ncols, nrows);
// CHECK: +  add_rows<<<dim3((nrows + 7) / 8, KTX_SPLIT, 1), block_dims, 0, stream>>>(x, y, dst, ncols, nrows);
// CONFIG: +// ktx: `split` instantiated with SPLIT=4
// CONFIG: -  for (int col = threadIdx.x; col < ncols; col += WARP_SIZE) {
// CONFIG: +  for (int col = blockIdx.y * WARP_SIZE + threadIdx.x; col < ncols; col += WARP_SIZE * gridDim.y) {
// CONFIG: -  add_rows<<<dim3((nrows + 7) / 8, 1, 1), block_dims, 0, stream>>>(x, y, dst, ncols, nrows);
// CONFIG: +  add_rows<<<dim3((nrows + 7) / 8, 4, 1), block_dims, 0, stream>>>(x, y, dst, ncols, nrows);
