// RUN: ktx apply --passes cluster-rows %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes cluster-rows %s --config CLUSTER=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One block per row: sum of squares, block reduction through shared memory, then a scaled copy.
// The row is split over a cluster of CLUSTER blocks; their totals meet through distributed shared memory.
__global__ void row_scale(float* __restrict__ y, const float* __restrict__ x, int d) {
  __shared__ float part[32];
  const float* row = x + blockIdx.x * d;
  float s = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) s += row[i] * row[i];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) part[0] = s;
  }
  __syncthreads();
  const float scale = rsqrtf(part[0] / d + 1e-6f);
  for (int i = threadIdx.x; i < d; i += blockDim.x) y[blockIdx.x * d + i] = row[i] * scale;
}

void launch_row_scale(float* y, const float* x, int rows, int d) {
  row_scale<<<rows, 256>>>(y, x, d);
}

// The launcher gains the cluster's grid y; the harness launches with the template's mapping,
// grid (rows, CLUSTER), and the cluster shape is compiled into the kernel, so an ordinary
// launch forms the clusters.

// CHECK: {{.*}}: remark: [cluster-rows] row_scale: rewritten: exposed CLUSTER {1, 2, 4, 8}; row loops L0, L3 interleave over the cluster; block totals meet through part[0]
// CHECK: -__global__ void row_scale(float* __restrict__ y, const float* __restrict__ x, int d) {
// CHECK: +// ktx:knobs begin
// CHECK: +// row_scale templated by `cluster-rows`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_CLUSTER
// CHECK: +#define KTX_CLUSTER 1  // cluster-rows: blocks per row, one thread-block cluster (1: one block, as written)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +__global__ void __attribute__((cluster_dims(1, KTX_CLUSTER, 1))) row_scale(float* __restrict__ y, const float* __restrict__ x, int d) {
// CHECK: +#if KTX_CLUSTER > 1
// CHECK: +  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < d; i += blockDim.x * KTX_CLUSTER) s += row[i] * row[i];
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_CLUSTER > 1
// CHECK: +  // cluster-rows: the blocks of this row's cluster combine their totals through distributed shared memory
// CHECK: +  // (the cluster barrier orders this block too: no __syncthreads)
// CHECK: +  __cluster_barrier_arrive();  // cluster.sync(): every block's total is in place
// CHECK: +  __cluster_barrier_wait();
// CHECK: +  float ktx_cluster_total = *static_cast<const float*>(__cluster_map_shared_rank(&part[0], 0));
// CHECK: +#pragma unroll
// CHECK: +  for (unsigned ktx_rank = 1; ktx_rank < KTX_CLUSTER; ++ktx_rank) {
// CHECK: +    ktx_cluster_total += *static_cast<const float*>(__cluster_map_shared_rank(&part[0], ktx_rank));
// CHECK: +  }
// CHECK: +  __cluster_barrier_arrive();  // done reading the others' shared memory (waited for at the end)
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_CLUSTER > 1
// CHECK: +  const float scale = rsqrtf(ktx_cluster_total / d + 1e-6f);
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_CLUSTER > 1
// CHECK: +  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < d; i += blockDim.x * KTX_CLUSTER) y[blockIdx.x * d + i] = row[i] * scale;
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_CLUSTER > 1
// CHECK: +  __cluster_barrier_wait();  // no block leaves while another may read its shared memory
// CHECK: +#endif
// CHECK: +#if KTX_CLUSTER > 1
// CHECK: +  row_scale<<<dim3(rows, KTX_CLUSTER), 256>>>(y, x, d);
// CHECK: +#else
// CHECK: +#endif
// CONFIG: -__global__ void row_scale(float* __restrict__ y, const float* __restrict__ x, int d) {
// CONFIG: +// ktx: `cluster-rows` instantiated with CLUSTER=4
// CONFIG: +__global__ void __attribute__((cluster_dims(1, 4, 1))) row_scale(float* __restrict__ y, const float* __restrict__ x, int d) {
// CONFIG: -  for (int i = threadIdx.x; i < d; i += blockDim.x) s += row[i] * row[i];
// CONFIG: +  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < d; i += blockDim.x * 4) s += row[i] * row[i];
// CONFIG: -  __syncthreads();
// CONFIG: -  const float scale = rsqrtf(part[0] / d + 1e-6f);
// CONFIG: -  for (int i = threadIdx.x; i < d; i += blockDim.x) y[blockIdx.x * d + i] = row[i] * scale;
// CONFIG: +  // cluster-rows: the blocks of this row's cluster combine their totals through distributed shared memory
// CONFIG: +  // (the cluster barrier orders this block too: no __syncthreads)
// CONFIG: +  __cluster_barrier_arrive();  // cluster.sync(): every block's total is in place
// CONFIG: +  __cluster_barrier_wait();
// CONFIG: +  float ktx_cluster_total = *static_cast<const float*>(__cluster_map_shared_rank(&part[0], 0));
// CONFIG: +#pragma unroll
// CONFIG: +  for (unsigned ktx_rank = 1; ktx_rank < 4; ++ktx_rank) {
// CONFIG: +    ktx_cluster_total += *static_cast<const float*>(__cluster_map_shared_rank(&part[0], ktx_rank));
// CONFIG: +  }
// CONFIG: +  __cluster_barrier_arrive();  // done reading the others' shared memory (waited for at the end)
// CONFIG: +  const float scale = rsqrtf(ktx_cluster_total / d + 1e-6f);
// CONFIG: +  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < d; i += blockDim.x * 4) y[blockIdx.x * d + i] = row[i] * scale;
// CONFIG: +  __cluster_barrier_wait();  // no block leaves while another may read its shared memory
// CONFIG: -  row_scale<<<rows, 256>>>(y, x, d);
// CONFIG: +  row_scale<<<dim3(rows, 4), 256>>>(y, x, d);
