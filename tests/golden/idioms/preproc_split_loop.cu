// RUN: ktx apply --passes split %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: an architecture test chooses the row loop's header; the kernel is indexed with the
// branch nvcc compiles for sm_90, and split leaves it as is, naming the #if line.
__global__ void threshold_rows(unsigned char* out, const unsigned char* in, int w) {
  int y = blockIdx.x;
#if defined(WIDE_ROWS) && __CUDA_ARCH__ >= 700
  for (int x = threadIdx.x; x < w; x += 2 * blockDim.x) {
#else
  for (int x = threadIdx.x; x < w; x += blockDim.x) {
#endif
    out[y * w + x] = in[y * w + x] > 128 ? 255 : 0;
  }
}

void launch_threshold_rows(unsigned char* out, const unsigned char* in, int h, int w) {
  threshold_rows<<<h, 256>>>(out, in, w);
}

// CHECK: {{.*}}: remark: [split] threshold_rows: skipped: `#if defined(WIDE_ROWS) && __CUDA_ARCH__ >= 700` splits a statement across its branches (line 6); left as is
// CHECK-NOT: {{[-+].*}}
