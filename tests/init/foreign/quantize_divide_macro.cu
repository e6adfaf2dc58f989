// A 2-D elementwise kernel launched through a ceil-division macro of a local header; each
// thread's element is row * columns + column, both global thread indices bounded by guards.
#include <cstdint>
#include "launch_util.cuh"

#define BLOCKSIZE_X 32
#define BLOCKSIZE_Y 32

__global__ void quantize_rows(const float* __restrict__ input, const float* __restrict__ scale,
                              uint16_t* __restrict__ out_q, int rows, int columns) {
  int column = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (column >= columns) return;
  if (row >= rows) return;
  uint64_t idx = (uint64_t)row * (uint64_t)columns + (uint64_t)column;
  float q = input[idx] / scale[column];
  out_q[idx] = (uint16_t)(q < 0.0f ? 0.0f : q);
}

void quantize_rows_cuda(const float* input, const float* scale, uint16_t* out_q, int rows, int columns) {
  dim3 threads(BLOCKSIZE_X, BLOCKSIZE_Y);
  dim3 blocks(DIVIDE(columns, BLOCKSIZE_X), DIVIDE(rows, BLOCKSIZE_Y));
  quantize_rows<<<blocks, threads>>>(input, scale, out_q, rows, columns);
}
