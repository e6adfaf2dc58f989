// A torch-style launcher: the sizes are the caller's tensors' (size(), numel()), which ktx does
// not read; the kernel widens its row offset with a functional cast (int64_t(d)).
#include <algorithm>
#include <cstdint>

struct Tensor {
  int64_t size(int dim) const;
  int64_t numel() const;
  void* data_ptr() const;
};

__global__ void silu_and_mul(float* __restrict__ out, const float* __restrict__ input, const int d) {
  const int token_idx = blockIdx.x;
  const int64_t token_idx_d = token_idx * int64_t(d);
  const int64_t token_idx_2d = token_idx_d * 2;
  for (int idx = threadIdx.x; idx < d; idx += blockDim.x) {
    const float x = input[token_idx_2d + idx];
    const float y = input[token_idx_2d + d + idx];
    out[token_idx_d + idx] = x / (1.0f + __expf(-x)) * y;
  }
}

void silu_and_mul_launch(Tensor& out, Tensor& input) {
  int64_t num_tokens = input.numel() / input.size(-1);
  int d = input.size(-1) / 2;
  dim3 grid(num_tokens);
  dim3 block(std::min(d, 256));
  silu_and_mul<<<grid, block>>>((float*)out.data_ptr(), (const float*)input.data_ptr(), d);
}
