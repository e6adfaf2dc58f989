// RUN: ktx apply --passes coarsen %s --config COARSEN=2 --diff -q | filecheck %s --match-full-lines
// A launch inside a multi-line #define: only the grid inside the body is divided (the macro
// body is parsed on its own at the same offsets), not the whole launch call.
__global__ void fill(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 1.f;
}

#define LAUNCH_FILL(T)                                \
  fill<<<(n + 255) / 256, 256, 0, stream>>>(          \
      y,                                              \
      n)

void launch(float* y, int n, cudaStream_t stream) {
  LAUNCH_FILL(float);
}

// CHECK: +// ktx: `coarsen` instantiated with COARSEN=2
// CHECK: -  int i = blockIdx.x * blockDim.x + threadIdx.x;
// CHECK: -  if (i < n) y[i] = 1.f;
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CHECK: +    int i = (blockIdx.x * 2 + ktx_k) * blockDim.x + threadIdx.x;
// CHECK: +    if (i < n) y[i] = 1.f;
// CHECK: +  }
// CHECK: -  fill<<<(n + 255) / 256, 256, 0, stream>>>(          \
// CHECK: +  fill<<<((n + 255) / 256 + 1) / 2, 256, 0, stream>>>(          \
