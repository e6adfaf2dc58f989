// RUN: ktx apply --passes block-size %s --knobs 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes block-size %s --config BLOCK_X=512 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// RUN: ktx apply --passes expose,block-size,vectorize %s --knobs 2>&1 | filecheck %s --match-full-lines --check-prefix=CHAIN
// RUN: ktx apply --passes cluster-rows %s --knobs 2>&1 | filecheck %s --match-full-lines --check-prefix=CLUSTER
// A llama.cpp-like row norm: the block size is a template parameter, and the launcher picks one
// of two instantiations by shape (ncols < 1024 ? 32 : 1024), each in its own dim3 local. The
// template parameter is blockDim.x at both launches, so it becomes BLOCK_X: the instantiated
// values plus the powers of two up to the largest one (s_sum[32] is a fixed-size array, known to
// fit 1024 threads), each launch's template argument and block in step. Vectorize then reads
// `col += block_size` as a block stride. expose leaves the template parameter and the 1024 of
// the second launch to block-size (a knob on the literal alone would split block and template).
// cluster-rows finds the row loops through the same fact and refuses on the two-level reduction.
#define WARP_SIZE 32

__device__ __forceinline__ float warp_reduce_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffff, x, offset, 32);
  return x;
}

template <int block_size>
__global__ void rms_norm(const float* x, float* dst, const int ncols, const float eps) {
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  float tmp = 0.0f;
  for (int col = tid; col < ncols; col += block_size) {
    const float xi = x[row * ncols + col];
    tmp += xi * xi;
  }
  tmp = warp_reduce_sum(tmp);
  if (block_size > WARP_SIZE) {
    __shared__ float s_sum[32];
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int lane_id = threadIdx.x % WARP_SIZE;
    if (lane_id == 0) s_sum[warp_id] = tmp;
    __syncthreads();
    tmp = lane_id < block_size / WARP_SIZE ? s_sum[lane_id] : 0.0f;
    tmp = warp_reduce_sum(tmp);
  }
  const float scale = rsqrtf(tmp / ncols + eps);
  for (int col = tid; col < ncols; col += block_size) {
    dst[row * ncols + col] = scale * x[row * ncols + col];
  }
}

void rms_norm_cuda(const float* x, float* dst, const int ncols, const int nrows, const float eps) {
  if (ncols < 1024) {
    const dim3 block_dims(WARP_SIZE, 1, 1);
    rms_norm<WARP_SIZE><<<nrows, block_dims>>>(x, dst, ncols, eps);
  } else {
    const dim3 block_dims(1024, 1, 1);
    rms_norm<1024><<<nrows, block_dims>>>(x, dst, ncols, eps);
  }
}

// CHECK: {{.*}}: remark: [block-size] rms_norm: rewritten: exposed BLOCK_X {32, 64, 128, 256, 512, 1024}; the launcher picks block_size among 32, 1024 by shape (line 49, line 52): every launch takes the knob, and the dispatch table picks it per shape; launch mapping: block[0] = BLOCK_X; block_size (template parameter) is the launch's block size: the template argument and the block both take the knob
// CHECK: {
// CHECK:   "kernel": "rms_norm",
// CHECK:   "pipeline": "block-size",
// CHECK:   "knobs": [
// CHECK:     {"name": "BLOCK_X", "values": [32, 64, 128, 256, 512, 1024], "default": 32, "help": "threads per block along x, and the kernel's block_size (was 32)", "pass": "block-size", "site": "rms_norm"}
// CHECK:   ],
// CHECK:   "constraints": [],
// CHECK:   "launch": {"grid": ["nrows"], "block": ["BLOCK_X", "1", "1"], "shared": "0"},
// CHECK:   "name_expression": "rms_norm<32>",
// CHECK:   "template_args": ["{BLOCK_X}"]
// CHECK: }
// CONFIG: +// ktx: `block-size` instantiated with BLOCK_X=512
// CONFIG: -__global__ void rms_norm(const float* x, float* dst, const int ncols, const float eps) {
// CONFIG: +__global__ void __launch_bounds__(512) rms_norm(const float* x, float* dst, const int ncols, const float eps) {
// CONFIG: -    const dim3 block_dims(WARP_SIZE, 1, 1);
// CONFIG: -    rms_norm<WARP_SIZE><<<nrows, block_dims>>>(x, dst, ncols, eps);
// CONFIG: +    const dim3 block_dims(512, 1, 1);
// CONFIG: +    rms_norm<512><<<nrows, block_dims>>>(x, dst, ncols, eps);
// CONFIG: -    const dim3 block_dims(1024, 1, 1);
// CONFIG: -    rms_norm<1024><<<nrows, block_dims>>>(x, dst, ncols, eps);
// CONFIG: +    const dim3 block_dims(512, 1, 1);
// CONFIG: +    rms_norm<512><<<nrows, block_dims>>>(x, dst, ncols, eps);
// CHAIN: {{.*}}: remark: [expose] block_size: skipped: block_size is the launch's block size (every launch passes it as the block too): block-size makes it the knob BLOCK_X, the template argument and the block in step
// CHAIN: {{.*}}: remark: [expose] WARP_SIZE: skipped: WARP_SIZE is the warp size, fixed by the hardware
// CHAIN: {{.*}}: remark: [expose] BLOCK_DIMS: skipped: 1024 sets the block of a launch that passes the same size as the template parameter block_size: block-size moves both, a knob here would split them
// CHAIN: {{.*}}: remark: [block-size] rms_norm: rewritten: exposed BLOCK_X {32, 64, 128, 256, 512, 1024}; the launcher picks block_size among 32, 1024 by shape (line 49, line 52): every launch takes the knob, and the dispatch table picks it per shape; launch mapping: block[0] = BLOCK_X; block_size (template parameter) is the launch's block size: the template argument and the block both take the knob
// CHAIN: {{.*}}: remark: [vectorize] L1: rewritten: exposed VEC_L1 {1, 2, 4}; packed 1 pointer(s): x
// CHAIN: {{.*}}: remark: [vectorize] L2: rewritten: exposed VEC_L2 {1, 2, 4}; packed 2 pointer(s): dst, x; dst and x may alias: packed only where a run-time check finds them apart or the same
// CHAIN: {{.*}}: remark: [vectorize] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
// CHAIN: {
// CHAIN:   "kernel": "rms_norm",
// CHAIN:   "pipeline": "expose,block-size,vectorize",
// CHAIN:   "knobs": [
// CHAIN:     {"name": "BLOCK_X", "values": [32, 64, 128, 256, 512, 1024], "default": 32, "help": "threads per block along x, and the kernel's block_size (was 32)", "pass": "block-size", "site": "rms_norm"},
// CHAIN:     {"name": "VEC_L1", "values": [1, 2, 4], "default": 1, "help": "elements per packed access in loop L1 (1: scalar, as written; x: 4 B)", "pass": "vectorize", "site": "L1"},
// CHAIN:     {"name": "VEC_L2", "values": [1, 2, 4], "default": 1, "help": "elements per packed access in loop L2 (1: scalar, as written; dst: 4 B, x: 4 B)", "pass": "vectorize", "site": "L2"}
// CHAIN:   ],
// CHAIN:   "constraints": [],
// CHAIN:   "launch": {"grid": ["nrows"], "block": ["BLOCK_X", "1", "1"], "shared": "0"},
// CHAIN:   "name_expression": "rms_norm<32>",
// CHAIN:   "template_args": ["{BLOCK_X}"]
// CHAIN: }
// CLUSTER: {{.*}}: remark: [cluster-rows] rms_norm: skipped: after the reduction's last __syncthreads() (line 31) the kernel should read the block total from one shared element; it reads none
// CLUSTER: {
// CLUSTER:   "kernel": "rms_norm",
// CLUSTER:   "pipeline": "cluster-rows",
// CLUSTER:   "knobs": [],
// CLUSTER:   "constraints": [],
// CLUSTER:   "launch": {"grid": ["nrows"], "block": ["32", "1", "1"], "shared": "0"},
// CLUSTER:   "name_expression": "rms_norm<WARP_SIZE>",
// CLUSTER:   "template_args": ["WARP_SIZE"]
// CLUSTER: }
