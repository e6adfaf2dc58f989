// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// A braced block whose kernel reads blockDim.x and blockDim.y: both become knobs, through the
// locals the braces name, so the grid computed from DIMY follows.
__global__ void scale_rows(float* out, const float* in, long rows, int cols) {
  const long row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[row * cols + c] = 2.f * in[row * cols + c];
}

void launch_scale_rows(float* out, const float* in, long rows, int cols) {
  const int DIMX = 32;
  const int DIMY = 8;
  const int blocks = (rows + DIMY - 1) / DIMY;
  scale_rows<<<blocks, {DIMX, DIMY, 1}>>>(out, in, rows, cols);
}

// CHECK: {{.*}}: remark: [block-size] scale_rows: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}, BLOCK_Y {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
// CHECK: +__global__ void __launch_bounds__(KTX_BLOCK_X * KTX_BLOCK_Y * 1) scale_rows(float* out, const float* in, long rows, int cols) {
// CHECK: -  const int DIMX = 32;
// CHECK: -  const int DIMY = 8;
// CHECK: +  const int DIMX = KTX_PICK(KTX_BLOCK_X, (32));
// CHECK: +  const int DIMY = KTX_PICK(KTX_BLOCK_Y, (8));
