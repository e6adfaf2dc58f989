// RUN: ktx apply --passes rows-per-block %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes rows-per-block %s --config ROWS=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// llama.cpp writes every launch with three components, `dim3 block_dims(WARP_SIZE, 1, 1)` and
// `dim3 blocks_num(nrows, 1, 1)`: a 1-D block and grid. The block's y of 1 becomes ROWS and the
// grid's x is divided by it. WARP_SIZE comes from a header the file includes (its value is not
// here): every launch passes it as the block, so the `col += WARP_SIZE` loops are block-stride.
#include "common.cuh"

__global__ void rms_norm_warp(const float* __restrict__ x, float* __restrict__ dst, const int ncols, const float eps) {
  const int row = blockIdx.x;
  float sum = 0.0f;
  for (int col = threadIdx.x; col < ncols; col += WARP_SIZE) {
    const float xi = x[row * ncols + col];
    sum += xi * xi;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, offset, 32);
  const float scale = rsqrtf(sum / ncols + eps);
  for (int col = threadIdx.x; col < ncols; col += WARP_SIZE) {
    dst[row * ncols + col] = scale * x[row * ncols + col];
  }
}

void rms_norm_warp_cuda(const float* x, float* dst, const int ncols, const int nrows, const float eps, cudaStream_t stream) {
  const dim3 blocks_num(nrows, 1, 1);
  const dim3 block_dims(WARP_SIZE, 1, 1);
  rms_norm_warp<<<blocks_num, block_dims, 0, stream>>>(x, dst, ncols, eps);
}

// CHECK: {{.*}}: remark: [rows-per-block] rms_norm_warp: rewritten: exposed ROWS {1, 2, 4, 8, 16}; shuffles: blocks of whole warps when ROWS > 1
// CHECK: +// ktx:knobs begin
// CHECK: +// rms_norm_warp templated by `rows-per-block`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_ROWS
// CHECK: +#define KTX_ROWS 1  // rows-per-block: rows per block, stacked along threadIdx.y (1: one row, as written)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  const int row = blockIdx.x;
// CHECK: +  const int row = (blockIdx.x * KTX_ROWS + threadIdx.y);
// CHECK: -  const dim3 blocks_num(nrows, 1, 1);
// CHECK: -  const dim3 block_dims(WARP_SIZE, 1, 1);
// CHECK: +  const dim3 blocks_num((nrows) / KTX_ROWS, 1, 1);
// CHECK: +  const dim3 block_dims(WARP_SIZE, KTX_ROWS, 1);
// CONFIG: +// ktx: `rows-per-block` instantiated with ROWS=4
// CONFIG: -  const int row = blockIdx.x;
// CONFIG: +  const int row = (blockIdx.x * 4 + threadIdx.y);
// CONFIG: -  const dim3 blocks_num(nrows, 1, 1);
// CONFIG: -  const dim3 block_dims(WARP_SIZE, 1, 1);
// CONFIG: +  const dim3 blocks_num((nrows) / 4, 1, 1);
// CONFIG: +  const dim3 block_dims(WARP_SIZE, 4, 1);
