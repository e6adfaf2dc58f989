// RUN: ktx apply --passes coarsen %s --config COARSEN=2 --diff -q | filecheck %s --match-full-lines
// A 2-D grid passed as a dim3 whose components the launch does not write (a launcher
// parameter, a local returned by a helper): the grid's x is divided through `.x`, never the
// dim3 itself (`(grid + 1) / 2` does not compile). A local built by `auto g = dim3(a, b)`
// has its first constructor argument divided.
__global__ void fill(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[blockIdx.y * n + i] = 1.f;
}

dim3 make_grid(int n, int rows);

void launch_param(float* y, int n, dim3 grid) {
  fill<<<grid, 256>>>(y, n);
}

void launch_helper(float* y, int n, int rows) {
  dim3 grid = make_grid(n, rows);
  fill<<<grid, 256>>>(y, n);
}

void launch_auto(float* y, int n, int rows) {
  auto grid = dim3((n + 255) / 256, rows);
  fill<<<grid, 256>>>(y, n);
}

// CHECK: +// ktx: `coarsen` instantiated with COARSEN=2
// CHECK: -  int i = blockIdx.x * blockDim.x + threadIdx.x;
// CHECK: -  if (i < n) y[blockIdx.y * n + i] = 1.f;
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CHECK: +    int i = (blockIdx.x * 2 + ktx_k) * blockDim.x + threadIdx.x;
// CHECK: +    if (i < n) y[blockIdx.y * n + i] = 1.f;
// CHECK: +  }
// CHECK: -  fill<<<grid, 256>>>(y, n);
// CHECK: +  fill<<<dim3((grid.x + 1) / 2, grid.y, grid.z), 256>>>(y, n);
// CHECK: -  fill<<<grid, 256>>>(y, n);
// CHECK: +  fill<<<dim3((grid.x + 1) / 2, grid.y, grid.z), 256>>>(y, n);
// CHECK: -  auto grid = dim3((n + 255) / 256, rows);
// CHECK: +  auto grid = dim3(((n + 255) / 256 + 1) / 2, rows);
