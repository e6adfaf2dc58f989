// ggml's diag_mask shape: one thread per (row, col) of a 2-D launch, the row unguarded (the
// launch's threads are the rows), the sizes the caller's locals (ne00, nrows0) passed on.
struct tensor { long ne[4]; void* data; };
long tensor_rows(const tensor* t);

static __global__ void mask_rows(const float* x, float* dst, const int ncols, const int rows_per_channel,
                                 const int n_past) {
  const int col = blockDim.y * blockIdx.y + threadIdx.y;
  const int row = blockDim.x * blockIdx.x + threadIdx.x;
  if (col >= ncols) {
    return;
  }
  const int i = row * ncols + col;
  dst[i] = x[i] - (col > n_past + row % rows_per_channel) * 1e30f;
}

static void mask_rows_cuda(const float* x, float* dst, const int ncols_x, const int nrows_x,
                           const int rows_per_channel, const int n_past) {
  const dim3 block_dims(1, 32, 1);
  const int block_num_x = (ncols_x + 32 - 1) / 32;
  const dim3 block_nums(nrows_x, block_num_x, 1);
  mask_rows<<<block_nums, block_dims>>>(x, dst, ncols_x, rows_per_channel, n_past);
}

void op_mask_rows(tensor* src0, tensor* dst, int n_past) {
  const long ne00 = src0->ne[0];
  const long ne01 = src0->ne[1];
  const int nrows0 = tensor_rows(src0);
  mask_rows_cuda((const float*)src0->data, (float*)dst->data, ne00, nrows0, ne01, n_past);
}
