// CORPUS: launches the way serving libraries write them: inside dispatch macros (a #define
// body, with __VA_ARGS__ template arguments, a macro defined inside the launcher), invoked
// from a lambda in a DISPATCH(...) call, through `auto kernel = k<T>;` aliases, and through
// the runtime API (cudaLaunchKernelEx with a config struct, cudaLaunchKernel with a cast).
// EXPECT: kernels=quant_kernel,reduce_kernel loops=2 launches=6 warnings=0 errors=0
// EXPECT: launch_kernels=quant_kernel,quant_kernel,reduce_kernel,reduce_kernel,reduce_kernel,quant_kernel
// EXPECT: launch_macros=LAUNCH_QUANT,-,LAUNCH_REDUCE,-,-,- launch_apis=-,-,-,-,cudaLaunchKernelEx,cudaLaunchKernel
#define LAUNCH_QUANT(T, ...)                                                    \
  do {                                                                          \
    quant_kernel<T, __VA_ARGS__><<<grid, block, 0, stream>>>(in, out, n);      \
  } while (0)

#define DISPATCH_FLOAT(flag, NAME, ...) \
  if (flag) {                           \
    using NAME = float;                 \
    __VA_ARGS__();                      \
  }

template <typename T, int GROUP, bool SCALE = false>
__global__ void quant_kernel(const T* in, signed char* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = static_cast<signed char>(in[i] * (SCALE ? 0.5f : 1.f) / GROUP);
  }
}

template <typename T, int TOPK>
__global__ void reduce_kernel(const T* in, T* out, int n) {
  T acc = 0;
#pragma unroll
  for (int k = 0; k < TOPK; ++k) acc += in[blockIdx.x * TOPK + k];
  out[blockIdx.x] = acc;
}

void launch(const float* in, signed char* out, float* red, int n, int topk, cudaStream_t stream) {
  dim3 grid((n + 255) / 256), block(256);
  DISPATCH_FLOAT(true, scalar_t, [&] {
    LAUNCH_QUANT(scalar_t, 128, true);
    quant_kernel<scalar_t, 64><<<grid, block, 0, stream>>>(in, out, n);
  });
#define LAUNCH_REDUCE(K) reduce_kernel<float, K><<<n / K, 1, 0, stream>>>(in, red, n)
  switch (topk) {
    case 2: LAUNCH_REDUCE(2); break;
    case 4: LAUNCH_REDUCE(4); break;
    default: {
      auto kernel = reduce_kernel<float, 8>;
      kernel<<<n / 8, 1, 0, stream>>>(in, red, n);
    }
  }
#undef LAUNCH_REDUCE
  cudaLaunchConfig_t config;
  config.gridDim = dim3(n / 16);
  config.blockDim = dim3(1);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchKernelEx(&config, reduce_kernel<float, 16>, in, red, n);
  void* args[] = {&in, &out, &n};
  cudaLaunchKernel((const void*)quant_kernel<float, 32>, grid, block, args, 0, stream);
}
