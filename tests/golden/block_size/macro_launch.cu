// RUN: ktx apply --passes block-size %s --config BLOCK_X=128 --diff -q | filecheck %s --match-full-lines
// A launch inside a multi-line #define: the block argument inside the body becomes the knob,
// the rest of the body (grid, arguments) is kept.
#define BS 256

__global__ void fill(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 1.f;
}

#define LAUNCH_FILL(T)                                \
  fill<<<(n + BS - 1) / BS, BS, 0, stream>>>(         \
      y,                                              \
      n)

void launch(float* y, int n, cudaStream_t stream) {
  LAUNCH_FILL(float);
}

// CHECK: -__global__ void fill(float* y, int n) {
// CHECK: +// ktx: `block-size` instantiated with BLOCK_X=128
// CHECK: +__global__ void __launch_bounds__(128) fill(float* y, int n) {
// CHECK: -  fill<<<(n + BS - 1) / BS, BS, 0, stream>>>(         \
// CHECK: +  fill<<<(n + 128 - 1) / 128, 128, 0, stream>>>(         \
