// RUN: ktx apply --passes split,block-size,launch-bounds %s --knobs -q | filecheck %s
// The knob space as JSON: knobs with values and defaults, constraints, the launch and name.
template <typename T>
__global__ void copy_rows(T* out, const T* in, int d) {
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[blockIdx.x * d + i] = in[blockIdx.x * d + i];
}

void launch_copy_rows(float* out, const float* in, int rows, int d) {
  copy_rows<float><<<rows, std::min(d, 1024)>>>(out, in, d);
}

// CHECK: {
// CHECK:   "kernel": "copy_rows",
// CHECK:   "pipeline": "block-size,split,launch-bounds",
// CHECK:   "knobs": [
// CHECK:     {"name": "BLOCK_X", "values": [0, 32, 64, 128, 256, 512, 1024], "default": 0, "help": "threads per block along x (0: as the original, now shape-dependent)", "pass": "block-size", "site": "copy_rows"},
// CHECK:     {"name": "SPLIT", "values": [1, 2, 4, 8, 16, 32], "default": 1, "help": "blocks per row (grid y); 1: one block walks the row", "pass": "split", "site": "copy_rows"},
// CHECK:     {"name": "MIN_BLOCKS", "values": [0, 1, 2, 3, 4, 6, 8], "default": 0, "help": "minimum resident blocks per SM (0: no minimum)", "pass": "launch-bounds", "site": "copy_rows"}
// CHECK:   ],
// CHECK:   "constraints": ["MIN_BLOCKS == 0 or BLOCK_X > 0", "MIN_BLOCKS * BLOCK_X <= 2048"],
// CHECK:   "launch": {"grid": ["rows", "SPLIT"], "block": ["BLOCK_X if BLOCK_X else min(d, 1024)"], "shared": "0"},
// CHECK:   "name_expression": "copy_rows<float>",
// CHECK:   "template_args": ["float"]
// CHECK: }
