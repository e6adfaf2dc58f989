// RUN: ktx apply --passes block-size %s --knobs 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes block-size %s --config BLOCK_X=128 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// A block size that is a template parameter every launch binds to the block it passes
// (k<BLOCK><<<rows, BLOCK>>>): the parameter is blockDim.x. The knob goes into the template
// argument and the block together, so the stride and the shared array sized by it follow.
#define BLOCK 256
template <int block_size>
__global__ void rowsum(float* out, const float* x, int n) {
  __shared__ float part[block_size];
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += block_size) acc += x[blockIdx.x * n + i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = block_size / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

void launch(float* out, const float* x, int rows, int n) {
  rowsum<BLOCK><<<rows, BLOCK>>>(out, x, n);
}

// CHECK: {{.*}}: remark: [block-size] rowsum: rewritten: exposed BLOCK_X {32, 64, 128, 256, 512, 1024}; launch mapping: 256 -> BLOCK_X in block[0]; block_size (template parameter) is the launch's block size: the template argument and the block both take the knob
// CHECK: {
// CHECK:   "kernel": "rowsum",
// CHECK:   "pipeline": "block-size",
// CHECK:   "knobs": [
// CHECK:     {"name": "BLOCK_X", "values": [32, 64, 128, 256, 512, 1024], "default": 256, "help": "threads per block along x, and the kernel's block_size (was 256)", "pass": "block-size", "site": "rowsum"}
// CHECK:   ],
// CHECK:   "constraints": [],
// CHECK:   "launch": {"grid": ["rows"], "block": ["BLOCK_X"], "shared": "0"},
// CHECK:   "name_expression": "rowsum<256>",
// CHECK:   "template_args": ["{BLOCK_X}"]
// CHECK: }
// CONFIG: +// ktx: `block-size` instantiated with BLOCK_X=128
// CONFIG: -__global__ void rowsum(float* out, const float* x, int n) {
// CONFIG: +__global__ void __launch_bounds__(128) rowsum(float* out, const float* x, int n) {
// CONFIG: -  rowsum<BLOCK><<<rows, BLOCK>>>(out, x, n);
// CONFIG: +  rowsum<128><<<rows, 128>>>(out, x, n);
