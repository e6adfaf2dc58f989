// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// A block written in braces, ``<<<g, {X, Y, 1}>>>`` (C++ builds the dim3), is read as a 2-D
// block. ``rows16`` reads threadIdx.x but never blockDim.x (16 lanes of float4 cover a row of
// 64): x stays 16 and only y, which the grid divides by, becomes a knob, with 16 * y <= 1024.
__global__ void rows16(float* out, const float* in, long rows) {
  const long row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row < rows) {
    const long v = (row * 64) / 4 + threadIdx.x;
    reinterpret_cast<float4*>(out)[v] = reinterpret_cast<const float4*>(in)[v];
  }
}

void launch_rows16(float* out, const float* in, long rows) {
  const int DIMX = 16;
  const int DIMY = 16;
  const int blocks = (rows + DIMY - 1) / DIMY;
  rows16<<<blocks, {DIMX, DIMY, 1}, 0>>>(out, in, rows);
}

// CHECK: {{.*}}: remark: [block-size] rows16: rewritten: exposed BLOCK_Y {0, 1, 2, 4, 8, 16, 32, 64}; x stays 16: the kernel never reads blockDim.x, so it may assume that size
// CHECK: +__global__ void __launch_bounds__(16 * KTX_BLOCK_Y * 1) rows16(float* out, const float* in, long rows) {
// CHECK: -  const int DIMY = 16;
// CHECK: +  const int DIMY = KTX_PICK(KTX_BLOCK_Y, (16));
