// Hand cluster variants of the suite's norms (kernels/rmsnorm, kernels/fused_add_rmsnorm) for wide
// rows at decode (issue 23: d = 8192, tokens = 1; the probe's "cluster of 8 blocks, DSMEM
// reduction" at 1.30x over a two-pass baseline). Written by hand (session 11) to compare with
// what `block-size,cluster-rows,row-registers` emits, in one harness (scripts/s11_norms_paired.py).
//
// A row is split over a cluster of CLUSTER blocks along y (rank = blockIdx.y); pack p of the row
// belongs to rank (p / threads) % CLUSTER, interleaved as the pass does. Each thread holds PACKS
// 16-byte packs of its part and of the weight in registers, all loaded before any math.
//
// The reduction is where this differs from both the pass and benchmarks/cluster_rows (session 9,
// which measured 2.75 us against the original's 2.71 us): no __syncthreads at all. Each warp's
// shuffled partial goes to its block's shared memory, ONE cluster barrier (arrive.release +
// wait.acquire; it also orders the block's own threads) publishes all CLUSTER x warps partials,
// and then every warp reads them over distributed shared memory, one partial a lane, and
// shuffles them together: each warp has the row total without a second level or a broadcast. The
// pass and the session-9 kernel pay two bar.sync of the block reduction (or one and a broadcast)
// plus the cluster barrier, and the pass has every thread map all CLUSTER ranks.
//
// Contract (the harness's candidates keep it): blockDim.x == 32, d % 8 == 0,
// CLUSTER * threads * PACKS * 8 >= d (no remainder loop), blockDim.y * CLUSTER <= 32... not
// required: a lane reads several partials when there are more than 32.
#include <cuda_bf16.h>

namespace norms_cluster_hand {

template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ Pack<T> load(const T* p) {
  Pack<T> r;
  *reinterpret_cast<uint4*>(r.v) = *reinterpret_cast<const uint4*>(p);
  return r;
}

template <typename T>
__device__ __forceinline__ void store(T* p, const Pack<T>& r) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(r.v);
}

// The cluster's sum of every thread's `v`, returned to every thread. One cluster barrier, no
// block barrier; the caller must call __cluster_barrier_wait() before it exits (the others may
// still read its `partial`).
template <int CLUSTER>
__device__ __forceinline__ float cluster_sum(float v) {
  __shared__ float partial[32];
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warps = blockDim.y;
  if (threadIdx.x == 0) partial[threadIdx.y] = v;
  __cluster_barrier_arrive();  // release: this block's partials are written
  __cluster_barrier_wait();    // acquire: every block's are
  float s = 0.f;
  for (int q = threadIdx.x; q < warps * CLUSTER; q += 32) {
    s += *static_cast<const float*>(__cluster_map_shared_rank(&partial[q % warps], q / warps));
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  __cluster_barrier_arrive();  // done reading the others' shared memory (release: plain arrive, as the pass)
  return s;
}

}  // namespace norms_cluster_hand

template <typename T, int PACKS, int CLUSTER>
__global__ void __attribute__((cluster_dims(1, CLUSTER, 1)))
rmsnorm_cluster_hand(T* __restrict__ output, const T* __restrict__ input, const T* __restrict__ weight,
                     const int d, const float eps) {
  using namespace norms_cluster_hand;
  constexpr int VEC = Pack<T>::N;
  const int threads = blockDim.x * blockDim.y;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int base = blockIdx.y * threads + tid;
  const int packs = d / VEC;
  const T* in_row = input + static_cast<long long>(blockIdx.x) * d;
  T* out_row = output + static_cast<long long>(blockIdx.x) * d;
  Pack<T> x[PACKS], w[PACKS];
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {  // loads first: the part of the row and of the weight
    const int p = base + k * CLUSTER * threads;
    if (p < packs) {
      x[k] = load(in_row + p * VEC);
      w[k] = load(weight + p * VEC);
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    if (base + k * CLUSTER * threads < packs) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) sum += to_float(x[k].v[j]) * to_float(x[k].v[j]);
    }
  }
  const float rcp = rsqrtf(cluster_sum<CLUSTER>(sum) / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int p = base + k * CLUSTER * threads;
    if (p < packs) {
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = __float2bfloat16_rn(to_float(x[k].v[j]) * rcp * to_float(w[k].v[j]));
      store(out_row + p * VEC, o);
    }
  }
  __cluster_barrier_wait();  // no block leaves while another may read its partials
}

template <typename T, int PACKS, int CLUSTER>
__global__ void __attribute__((cluster_dims(1, CLUSTER, 1)))
fused_add_rmsnorm_cluster_hand(T* __restrict__ input, T* __restrict__ residual, const T* __restrict__ weight,
                               const int d, const float eps) {
  using namespace norms_cluster_hand;
  constexpr int VEC = Pack<T>::N;
  const int threads = blockDim.x * blockDim.y;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int base = blockIdx.y * threads + tid;
  const int packs = d / VEC;
  T* in_row = input + static_cast<long long>(blockIdx.x) * d;
  T* res_row = residual + static_cast<long long>(blockIdx.x) * d;
  Pack<T> a[PACKS], r[PACKS], w[PACKS];
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {  // loads first: input, residual and weight packs
    const int p = base + k * CLUSTER * threads;
    if (p < packs) {
      a[k] = load(in_row + p * VEC);
      r[k] = load(res_row + p * VEC);
      w[k] = load(weight + p * VEC);
    }
  }
  float s[PACKS][VEC];  // the fp32 sum stays in registers: written to residual once, never re-read
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int p = base + k * CLUSTER * threads;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      s[k][j] = p < packs ? to_float(a[k].v[j]) + to_float(r[k].v[j]) : 0.f;
      sum += s[k][j] * s[k][j];
    }
    if (p < packs) {
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = __float2bfloat16_rn(s[k][j]);
      store(res_row + p * VEC, o);
    }
  }
  const float rcp = rsqrtf(cluster_sum<CLUSTER>(sum) / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int p = base + k * CLUSTER * threads;
    if (p < packs) {
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = __float2bfloat16_rn(s[k][j] * rcp * to_float(w[k].v[j]));
      store(in_row + p * VEC, o);
    }
  }
  __cluster_barrier_wait();  // no block leaves while another may read its partials
}
