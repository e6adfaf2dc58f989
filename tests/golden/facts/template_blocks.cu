// RUN: ktx inspect --facts %s | filecheck %s --match-full-lines
// A template block size the launcher picks by shape, each launch with its own `block_dims` local
// (if/else): the local in scope at each launch is read, so both launches pass block_size as their
// block, block_size IS blockDim.x, and the `col += block_size` loops are block-stride loops that
// partition the row (vectorize packs them).
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

// CHECK: kernel rms_norm (line 14)
// CHECK:   launch: line 42 <<<nrows, block_dims>>> template <WARP_SIZE>
// CHECK:   launch: line 45 <<<nrows, block_dims>>> template <1024>
// CHECK:   block alias: block_size is blockDim.x (template)
// CHECK:   template args: WARP_SIZE
// CHECK:   loop L1 line 19 depth 0: col from threadIdx.x step blockDim.x while col < ncols; owner block, partitions
// CHECK:   loop L2 line 34 depth 0: col from threadIdx.x step blockDim.x while col < ncols; owner block, partitions
// CHECK:   ref line 20: load x[row * ncols + col] root x index blockIdx.x*ncols + col elt float 4B unconditional alias global loop L1
// CHECK:   ref line 35: store dst[row * ncols + col] root dst index blockIdx.x*ncols + col elt float 4B unconditional alias global loop L2
// CHECK:   ref line 35: load x[row * ncols + col] root x index blockIdx.x*ncols + col elt float 4B unconditional alias global loop L2
// CHECK:   reduction: sum tmp over the loop at line 19 (line 21)
// CHECK:   pack L1: x (4B)
// CHECK:   pack L2: dst (4B), x (4B)
