// RUN: ktx apply --passes block-size %s --knobs 2>&1 | filecheck %s --match-full-lines
// A template block size the launcher picks by shape (rows < 64 ? 128 : 256) through a ternary
// local; the kernel's static_assert narrows the domain (no 32, no 64), and the shared array is
// sized by the parameter itself, so the powers of two run to the device's 1024.
template <int block_size>
__global__ void row_max(float* out, const float* x, int n) {
  static_assert(block_size >= 128 && block_size % 32 == 0, "whole warps, at least four");
  __shared__ float part[block_size];
  float m = -1e30f;
  for (int i = threadIdx.x; i < n; i += block_size) m = fmaxf(m, x[blockIdx.x * n + i]);
  part[threadIdx.x] = m;
  __syncthreads();
  for (int s = block_size / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

void launch(float* out, const float* x, int rows, int n) {
  if (rows < 64) {
    row_max<128><<<rows, 128>>>(out, x, n);
  } else {
    row_max<256><<<rows, 256>>>(out, x, n);
  }
}

// CHECK: {{.*}}: remark: [block-size] row_max: rewritten: exposed BLOCK_X {128, 256, 512, 1024}; the kernel's static_assert limits BLOCK_X to {128, 256, 512, 1024}; the launcher picks block_size among 128, 256 by shape (line 22, line 24): every launch takes the knob, and the dispatch table picks it per shape; launch mapping: block[0] = BLOCK_X; block_size (template parameter) is the launch's block size: the template argument and the block both take the knob
// CHECK: {
// CHECK:   "kernel": "row_max",
// CHECK:   "pipeline": "block-size",
// CHECK:   "knobs": [
// CHECK:     {"name": "BLOCK_X", "values": [128, 256, 512, 1024], "default": 128, "help": "threads per block along x, and the kernel's block_size (was 128)", "pass": "block-size", "site": "row_max"}
// CHECK:   ],
// CHECK:   "constraints": [],
// CHECK:   "launch": {"grid": ["rows"], "block": ["BLOCK_X"], "shared": "0"},
// CHECK:   "name_expression": "row_max<128>",
// CHECK:   "template_args": ["{BLOCK_X}"]
// CHECK: }
