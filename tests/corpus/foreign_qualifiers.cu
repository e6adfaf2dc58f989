// CORPUS: what real kernels write that tree-sitter-cuda does not read: an extended lambda
// (`[=] __device__ (...)`) inside a kernel, and locals and parameters declared through a
// pointer qualifier macro whose #define lives in a header (`const float * MY_RESTRICT x`).
// Every kernel is indexed without an error, and the launches below are found.
// EXPECT: kernels=scale_lambda,add_one,copy_rows loops=1 launches=3 warnings=0 errors=0
// EXPECT: launch_kernels=scale_lambda,add_one,copy_rows
__global__ void scale_lambda(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  auto f = [=] __device__ (float v) { return v * 3.f; };
  auto g = [&] __host__ __device__ (float v) -> float { return v + 1.f; };
  if (i < n) y[i] = g(f(x[i]));
}

__global__ void add_one(float* y_ptr, const float* x_ptr, int n) {
  const float * MY_RESTRICT x = x_ptr;
  float * MY_RESTRICT y = y_ptr;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.f;
}

__global__ void copy_rows(float* OTHER_RESTRICT out, const float* OTHER_RESTRICT in, int rows, int cols) {
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[blockIdx.x * cols + c] = in[blockIdx.x * cols + c];
}

void launch(float* y, const float* x, int n) {
  scale_lambda<<<(n + 255) / 256, 256>>>(y, x, n);
  add_one<<<(n + 255) / 256, 256>>>(y, x, n);
  copy_rows<<<n, 128>>>(y, x, n, 4);
}
