// Host stand-ins for the CUDA names a simple kernel uses: threads run one after another.
#pragma once
#include <cmath>
#include <cstdint>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
struct ktx_host_dim3 { unsigned x = 0, y = 0, z = 0; };
inline ktx_host_dim3 threadIdx, blockIdx, blockDim, gridDim;
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
// cooperative_groups' thread_block, as CUDA defines it: its thread and group indices are
// threadIdx and blockIdx (what ktx.ir.affine reads them as)
namespace cooperative_groups {
struct thread_block {
  ktx_host_dim3 thread_index() const { return threadIdx; }
  ktx_host_dim3 group_index() const { return blockIdx; }
  ktx_host_dim3 dim_threads() const { return blockDim; }
};
inline thread_block this_thread_block() { return {}; }
}  // namespace cooperative_groups
