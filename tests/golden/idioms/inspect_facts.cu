// RUN: ktx inspect %s | filecheck %s --match-full-lines
// What the index analysis reads, as ktx inspect shows it: the block size written as a macro is
// blockDim.x, the one-element-per-thread index and its guard, and how each loop is shared.
#define BLOCK_SIZE 256

__global__ void gelu1(float* out, const float* inp, int N) {
  int i = blockIdx.x * BLOCK_SIZE + threadIdx.x;
  if (i < N) out[i] = 0.5f * inp[i];
}

__global__ void rows(float* out, const float* inp, int n_rows, int C) {
  int row = blockIdx.x;
  while (row < n_rows) {
    for (int c = threadIdx.x; c < C; c += BLOCK_SIZE) out[row * C + c] = inp[row * C + c];
    row += gridDim.x;
  }
}

__global__ void grid_stride(float* x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
    x[i] = 0.f;
}

void launch_all(float* out, const float* inp, int N, int n_rows, int C) {
  gelu1<<<(N + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>>(out, inp, N);
  rows<<<n_rows, BLOCK_SIZE>>>(out, inp, n_rows, C);
}

// CHECK: {{.*}}
// CHECK:   kernel gelu1 (line 6)
// CHECK:     param out: float*  [ptr]
// CHECK:     param inp: const float*  [ptr, const]
// CHECK:     param N: int
// CHECK:     block size BLOCK_SIZE = 256 (define): every launch passes it as the block, so it is blockDim.x
// CHECK:     thread index i = blockDim.x*blockIdx.x + threadIdx.x (int, line 7), guarded by i < N (if, line 8)
// CHECK:   kernel rows (line 11)
// CHECK:     param out: float*  [ptr]
// CHECK:     param inp: const float*  [ptr, const]
// CHECK:     param n_rows: int
// CHECK:     param C: int
// CHECK:     block size BLOCK_SIZE = 256 (define): every launch passes it as the block, so it is blockDim.x
// CHECK:     loop L0 while line 13: (; row < n_rows; )  [rows over blocks]
// CHECK:       loop L1 for line 14: (int c = threadIdx.x; c < C; c += BLOCK_SIZE)  [block-stride]
// CHECK:   kernel grid_stride (line 19)
// CHECK:     param x: float*  [ptr]
// CHECK:     param n: size_t
// CHECK:     loop L2 for line 20: (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)  [grid-stride]
// CHECK:   launch gelu1<<<(N + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>> (line 25, in launch_all)
// CHECK:   launch rows<<<n_rows, BLOCK_SIZE>>> (line 26, in launch_all)
// CHECK:   perf constant BLOCK_SIZE = 256 (define, line 4; used in launch, loop-bound)
