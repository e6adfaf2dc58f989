// An RMS norm over rows of d elements whose row pitch the caller passes (FlashInfer's norms take
// input.stride(0)); each thread loads VEC elements a round, rounds = ceil_div(d, VEC * threads):
// the rounds span one row, so a contiguous input has stride_input = d.
#include <cstdint>

__host__ __device__ inline unsigned ceil_div(unsigned a, unsigned b) { return (a + b - 1) / b; }

template <unsigned VEC>
__global__ void rms_rows(const float* input, float* output, const unsigned d, const unsigned stride_input,
                         const unsigned stride_output, const float eps) {
  const unsigned bx = blockIdx.x, tx = threadIdx.x;
  const unsigned num_threads = blockDim.x;
  const unsigned rounds = ceil_div(d, VEC * num_threads);
  float sum = 0.f;
  for (unsigned i = 0; i < rounds; i++) {
    for (unsigned j = 0; j < VEC; j++) {
      const unsigned col = (i * num_threads + tx) * VEC + j;
      if (col < d) sum += input[bx * stride_input + col] * input[bx * stride_input + col];
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, offset);
  const float scale = rsqrtf(sum / d + eps);
  for (unsigned i = 0; i < rounds; i++) {
    for (unsigned j = 0; j < VEC; j++) {
      const unsigned col = (i * num_threads + tx) * VEC + j;
      if (col < d) output[bx * stride_output + col] = scale * input[bx * stride_input + col];
    }
  }
}

struct view2d {
  float* data;
  unsigned rows, cols, pitch;
};

void rms_rows_cuda(const view2d& in, const view2d& out, const float eps) {
  rms_rows<4><<<in.rows, 32>>>(in.data, out.data, in.cols, in.pitch, out.pitch, eps);
}
