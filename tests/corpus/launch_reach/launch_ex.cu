// cudaLaunchKernelEx: the geometry is in the config's fields, the kernel's arguments follow.
__global__ void scale(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

void run_scale(float* y, const float* x, float a, int n, cudaStream_t s) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((n + 255) / 256);
  config.blockDim = dim3(256);
  config.dynamicSmemBytes = 0;
  config.stream = s;
  cudaLaunchKernelEx(&config, scale, y, x, a, n);
}
