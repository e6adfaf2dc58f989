// RUN: ktx apply --passes coarsen %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes coarsen %s --config COARSEN=2 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One element per thread with the block size written as a macro that the launch also passes:
// ktx.ir.affine reads BLOCK_SIZE as blockDim.x, so the index is the global thread index and
// each thread takes COARSEN items one block apart (coalescing unchanged); the grid's x shrinks.
#define BLOCK_SIZE 256

__global__ void residual(float* out, const float* inp1, const float* inp2, int N) {
  int idx = blockIdx.x * BLOCK_SIZE + threadIdx.x;
  if (idx < N) {
    out[idx] = inp1[idx] + inp2[idx];
  }
}

void launch_residual(float* out, const float* inp1, const float* inp2, int N) {
  residual<<<(N + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>>(out, inp1, inp2, N);
}

// CHECK: {{.*}}: remark: [coarsen] residual: rewritten: exposed COARSEN {1, 2, 4, 8}
// CHECK: +// ktx:knobs begin
// CHECK: +// residual templated by `coarsen`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_COARSEN
// CHECK: +#define KTX_COARSEN 1  // coarsen: items per thread (the grid's x is divided by it)
// CHECK: +#endif
// CHECK: +#ifndef KTX_CDIV
// CHECK: +#define KTX_CDIV(a, b) (((a) + (b) - 1) / (b))
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  int idx = blockIdx.x * BLOCK_SIZE + threadIdx.x;
// CHECK: -  if (idx < N) {
// CHECK: -    out[idx] = inp1[idx] + inp2[idx];
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < KTX_COARSEN; ++ktx_k) {
// CHECK: +    int idx = (blockIdx.x * KTX_COARSEN + ktx_k) * BLOCK_SIZE + threadIdx.x;
// CHECK: +    if (idx < N) {
// CHECK: +      out[idx] = inp1[idx] + inp2[idx];
// CHECK: +    }
// CHECK: -  residual<<<(N + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>>(out, inp1, inp2, N);
// CHECK: +  residual<<<KTX_CDIV((N + BLOCK_SIZE - 1) / BLOCK_SIZE, KTX_COARSEN), BLOCK_SIZE>>>(out, inp1, inp2, N);
// CONFIG: +// ktx: `coarsen` instantiated with COARSEN=2
// CONFIG: -  int idx = blockIdx.x * BLOCK_SIZE + threadIdx.x;
// CONFIG: -  if (idx < N) {
// CONFIG: -    out[idx] = inp1[idx] + inp2[idx];
// CONFIG: +#pragma unroll
// CONFIG: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CONFIG: +    int idx = (blockIdx.x * 2 + ktx_k) * BLOCK_SIZE + threadIdx.x;
// CONFIG: +    if (idx < N) {
// CONFIG: +      out[idx] = inp1[idx] + inp2[idx];
// CONFIG: +    }
// CONFIG: -  residual<<<(N + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>>(out, inp1, inp2, N);
// CONFIG: +  residual<<<((N + BLOCK_SIZE - 1) / BLOCK_SIZE + 1) / 2, BLOCK_SIZE>>>(out, inp1, inp2, N);
