// RUN: ktx inspect --facts %s | filecheck %s --match-full-lines
// exllamav2 head_norm's pattern: one partial per warp in sums[MAX_WARPS] at the warp's id; the
// facts say how many entries the launch's threads write (the block decides, not MAX_WARPS).
#define MAX_HEAD_DIM 128
#define WARP_SIZE 32
#define MAX_WARPS (MAX_HEAD_DIM / WARP_SIZE)

__global__ void head_norm(const float* x, float* y, int head_dim) {
  int warp_id = threadIdx.x / WARP_SIZE;
  int lane_id = threadIdx.x % WARP_SIZE;
  int num_warps = (head_dim + 63) / 64;
  __shared__ float sums[MAX_WARPS];
  float v = x[blockIdx.x * head_dim + threadIdx.x];
  float s = v;
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffff, s, o);
  if (lane_id == 0) sums[warp_id] = s;
  __syncthreads();
  s = 0.f;
  for (int i = 0; i < num_warps; ++i) s += sums[i];
  y[blockIdx.x * head_dim + threadIdx.x] = v / s;
}

void launch(const float* x, float* y, int rows, int head_dim) { head_norm<<<rows, head_dim / 2>>>(x, y, head_dim); }

// CHECK: kernel head_norm (line 8)
// CHECK:   launch: line 23 <<<rows, head_dim / 2>>>
// CHECK:   setting: MAX_WARPS define block = 4 (named as a block size)
// CHECK:   setting MAX_WARPS: sizes __shared__ sums[MAX_WARPS], written at threadIdx.x / 32 (line 16): at least ceil_div(blockDim.x, 32) entries
// CHECK:   loop L0 line 15 depth 0: o from 16 step ? while o > 0; owner unknown
