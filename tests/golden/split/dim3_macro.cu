// RUN: ktx apply --passes split %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes split %s --config SPLIT=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// A dispatch macro launches one instantiation per branch; grid and block are dim3 locals of
// the function that expands it, named whole inside the macro body.
template <typename T, int UNROLL>
__global__ void row_scale(T* out, const T* in, int rows, int cols) {
  int row = blockIdx.x;
  if (row >= rows) return;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    out[row * cols + c] = in[row * cols + c] * T(2);
  }
}

#define LAUNCH_ROW_SCALE(U) row_scale<float, U><<<grid, block, 0, stream>>>(out, in, rows, cols)

void run_row_scale(float* out, const float* in, int rows, int cols, cudaStream_t stream) {
  dim3 grid(rows);
  dim3 block(128);
  if (cols % 4 == 0) {
    LAUNCH_ROW_SCALE(4);
  } else {
    LAUNCH_ROW_SCALE(1);
  }
}

// CHECK: {{.*}}: remark: [split] row_scale: rewritten: exposed SPLIT {1, 2, 4, 8, 16, 32}; row loops L0 interleave over gridDim.y
// CHECK: +// ktx:knobs begin
// CHECK: +// row_scale templated by `split`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_SPLIT
// CHECK: +#define KTX_SPLIT 1  // split: blocks per row (grid y); 1: one block walks the row
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
// CHECK: +  for (int c = blockIdx.y * blockDim.x + threadIdx.x; c < cols; c += blockDim.x * gridDim.y) {
// CHECK: -#define LAUNCH_ROW_SCALE(U) row_scale<float, U><<<grid, block, 0, stream>>>(out, in, rows, cols)
// CHECK: +#define LAUNCH_ROW_SCALE(U) row_scale<float, U><<<dim3(grid.x, KTX_SPLIT, grid.z), block, 0, stream>>>(out, in, rows, cols)
// CONFIG: +// ktx: `split` instantiated with SPLIT=4
// CONFIG: -  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
// CONFIG: +  for (int c = blockIdx.y * blockDim.x + threadIdx.x; c < cols; c += blockDim.x * gridDim.y) {
// CONFIG: -#define LAUNCH_ROW_SCALE(U) row_scale<float, U><<<grid, block, 0, stream>>>(out, in, rows, cols)
// CONFIG: +#define LAUNCH_ROW_SCALE(U) row_scale<float, U><<<dim3(grid.x, 4, grid.z), block, 0, stream>>>(out, in, rows, cols)
