// A llama.cpp-style variadic launch helper: the kernel is its first argument, the launch
// geometry sits in a params struct the caller fills. The helper forwards the struct's fields.
struct launch_params {
  dim3 grid_dim;
  dim3 block_dim;
  size_t smem;
  cudaStream_t stream;
};

template <typename Kernel, typename... Args>
void launch(Kernel kernel, const launch_params& params, Args... args) {
  kernel<<<params.grid_dim, params.block_dim, params.smem, params.stream>>>(args...);
}

__global__ void row_sum(float* out, const float* in, int rows, int cols) {
  int r = blockIdx.x * blockDim.y + threadIdx.y;
  if (r >= rows) return;
  float acc = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += in[r * cols + c];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
  if (threadIdx.x == 0) out[r] = acc;
}

void run_row_sum(float* out, const float* in, int rows, int cols, cudaStream_t s) {
  launch_params params;
  params.block_dim = dim3(32, 4);
  params.grid_dim = dim3((rows + 3) / 4);
  params.smem = 0;
  params.stream = s;
  launch(row_sum, params, out, in, rows, cols);
}
