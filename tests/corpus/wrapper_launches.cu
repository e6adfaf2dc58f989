// CORPUS: launches through a project's own helpers: a variadic template that launches its
// kernel parameter with the grid and block it is given (the call is the launch), a helper
// that calls that helper, a helper the file does not define named like a launcher
// (`launch_kernel(k, grid, block, args...)`), and a helper that computes its grid from its
// parameters (no launch site: the numbers are not written at the call). The helpers' own
// launches of their parameter stay listed under the parameter's name.
// EXPECT: kernels=scale,shift launches=8 warnings=0 errors=0
// EXPECT: launch_kernels=kernel,kernel,kernel,scale,scale,shift,shift,scale
// EXPECT: launch_wrappers=-,-,-,launch,launch,run_on,launch_kernel,via_runtime
template <typename T>
__global__ void scale(T* y, const T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * T(2);
}

__global__ void shift(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += 1.f;
}

template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args... args) {
  kernel<<<grid, block, smem, stream>>>(args...);
}

template <typename Kernel, typename... Args>
void run_on(cudaStream_t stream, Kernel kernel, dim3 grid, dim3 block, Args... args) {
  launch(kernel, grid, block, 0, stream, args...);
}

template <typename Kernel>
void computed(Kernel kernel, float* y, int n) {
  kernel<<<(n + 127) / 128, 128>>>(y, n);
}

template <typename Kernel>
void via_runtime(Kernel kernel, dim3 grid, dim3 block, float* y, int n) {
  void* args[] = {&y, &n};
  cudaLaunchKernel((void*)kernel, grid, block, args, 0, 0);
}

constexpr int kThreads = 256;

void go(float* y, const float* x, int n, cudaStream_t s) {
  launch(scale<float>, dim3((n + kThreads - 1) / kThreads), dim3(kThreads), 0, s, y, x, n);
  launch(&scale<double>, dim3(n), dim3(kThreads), 0, s, (double*)y, (const double*)x, n);
  run_on(s, shift, dim3((n + 127) / 128), dim3(128), y, n);
  launch_kernel(shift, dim3((n + 63) / 64), dim3(64), y, n);
  computed(shift, y, n);
  via_runtime(scale<float>, dim3(n), dim3(32), y, n);
}
