// A row softmax whose launcher picks the template arguments by the row length, written for
// ktx init's tests (modelled on DeepSpeed's attn_softmax): the first launch's arguments hold
// only for rows <= 32, so the draft must not take them silently; and `threads` is 128 at the
// first launches, 256 only inside the last block that declares it again.
template <int PER_THREAD, int WARPS>
__global__ void row_softmax(float* vals, int cols) {
  float* row = vals + blockIdx.x * cols;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) row[i] = __expf(row[i]) / (PER_THREAD * WARPS);
}

void launch_row_softmax(float* vals, int rows, int cols, cudaStream_t stream) {
  const int threads = 128;
  if (cols <= 32)
    row_softmax<1, (threads / 32)><<<rows, threads, 0, stream>>>(vals, cols);
  else if (cols <= 1024)
    row_softmax<8, (threads / 32)><<<rows, threads, 0, stream>>>(vals, cols);
  else {
    const int threads = 256;
    row_softmax<32, (threads / 32)><<<rows, threads, 0, stream>>>(vals, cols);
  }
}
