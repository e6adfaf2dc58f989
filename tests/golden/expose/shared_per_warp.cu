// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// A #define that sizes a shared array written at the warp's id (exllamav2 head_norm's MAX_WARPS):
// the knob keeps it at least the warps the launch has (MAX_WARPS = 1 at 64 threads wrote past it).
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

// CHECK: {{.*}}: remark: [expose] MAX_WARPS: rewritten: exposed MAX_WARPS {1, 2, 4, 8, 16}; MAX_WARPS >= ceil_div(launch_block_x, 32): the shared array it sizes takes an entry per thread or warp of the launch (launch_block_x, _y: the block as the pipeline ends)
// CHECK: -#define MAX_WARPS (MAX_HEAD_DIM / WARP_SIZE)
// CHECK: +#define KTX_MAX_WARPS 4  // expose: #define MAX_WARPS (was 4)
// CHECK: +#define MAX_WARPS KTX_MAX_WARPS
