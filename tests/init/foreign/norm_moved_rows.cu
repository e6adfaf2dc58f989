// A row norm that moves its output pointer once, at the top, to its row of a dense
// [samples, channels, rows, cols] tensor (ggml's norm_f32 writes dst this way); the input is
// moved by strides the caller passes, which ktx cannot know.
#include <cstdint>

__global__ void norm_rows(const float* x, float* dst, const int ncols, const int64_t stride_row,
                          const int64_t stride_channel, const int64_t stride_sample, const float eps) {
  const int nrows = gridDim.x;
  const int nchannels = gridDim.y;
  const int row = blockIdx.x;
  const int channel = blockIdx.y;
  const int sample = blockIdx.z;
  x += sample * stride_sample + channel * stride_channel + row * stride_row;
  dst += ((sample * nchannels + channel) * nrows + row) * ncols;
  float sum = 0.0f;
  for (int col = threadIdx.x; col < ncols; col += blockDim.x) sum += x[col] * x[col];
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, offset);
  const float scale = rsqrtf(sum / ncols + eps);
  for (int col = threadIdx.x; col < ncols; col += blockDim.x) dst[col] = scale * x[col];
}

void norm_rows_cuda(const float* x, float* dst, const int ncols, const int nrows, const int nchannels,
                    const int nsamples, const int64_t stride_row, const int64_t stride_channel,
                    const int64_t stride_sample, const float eps) {
  const dim3 blocks(nrows, nchannels, nsamples);
  norm_rows<<<blocks, 32>>>(x, dst, ncols, stride_row, stride_channel, stride_sample, eps);
}
