// A llama.cpp-like LayerNorm (norm_f32): the block size is a template parameter, the row loops
// step by it, mean and variance are reduced over a warp and then over the block's warps through
// a fixed 32-slot shared array, and the launcher picks one of two instantiations by shape. The
// issue-22 case: at 4096 columns the heuristic's 1024 threads lose to 512.
#define WARP_SIZE 32

__device__ __forceinline__ float2 warp_reduce_sum(float2 a) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    a.x += __shfl_xor_sync(0xffffffff, a.x, offset, 32);
    a.y += __shfl_xor_sync(0xffffffff, a.y, offset, 32);
  }
  return a;
}

template <int block_size>
__global__ void norm_f32(const float* x, float* dst, const int ncols, const float eps) {
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  float2 mean_var = make_float2(0.0f, 0.0f);
  for (int col = tid; col < ncols; col += block_size) {
    const float xi = x[row * ncols + col];
    mean_var.x += xi;
    mean_var.y += xi * xi;
  }
  mean_var = warp_reduce_sum(mean_var);
  if (block_size > WARP_SIZE) {
    __shared__ float2 s_sum[32];
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int lane_id = threadIdx.x % WARP_SIZE;
    if (lane_id == 0) s_sum[warp_id] = mean_var;
    __syncthreads();
    mean_var = lane_id < block_size / WARP_SIZE ? s_sum[lane_id] : make_float2(0.0f, 0.0f);
    mean_var = warp_reduce_sum(mean_var);
  }
  const float mean = mean_var.x / ncols;
  const float var = mean_var.y / ncols - mean * mean;
  const float inv_std = rsqrtf(var + eps);
  for (int col = tid; col < ncols; col += block_size) {
    dst[row * ncols + col] = (x[row * ncols + col] - mean) * inv_std;
  }
}

void norm_f32_cuda(const float* x, float* dst, const int ncols, const int nrows, const float eps) {
  if (ncols < 1024) {
    const dim3 block_dims(WARP_SIZE, 1, 1);
    norm_f32<WARP_SIZE><<<nrows, block_dims>>>(x, dst, ncols, eps);
  } else {
    const dim3 block_dims(1024, 1, 1);
    norm_f32<1024><<<nrows, block_dims>>>(x, dst, ncols, eps);
  }
}
