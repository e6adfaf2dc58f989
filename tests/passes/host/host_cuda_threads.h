// Host stand-ins for a block-per-row kernel with barriers: each CUDA thread of a block is a
// std::thread (threadIdx is thread_local), __syncthreads() is a std::barrier across the block,
// atomicAdd takes a lock. Blocks run one after another; `extern __shared__` arrays are the
// including namespace's own arrays (the driver defines them). C++20.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __restrict__ __restrict
struct ktx_host_dim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local ktx_host_dim3 threadIdx, blockIdx;
inline ktx_host_dim3 blockDim, gridDim;
struct alignas(16) float4 { float x, y, z, w; };
inline std::barrier<>* ktx_host_barrier = nullptr;
inline std::mutex ktx_host_atomic;
inline void __syncthreads() { ktx_host_barrier->arrive_and_wait(); }
inline float atomicAdd(float* p, float v) {
  std::lock_guard<std::mutex> lock(ktx_host_atomic);
  const float old = *p;
  *p = old + v;
  return old;
}
// grid x block threads, a block at a time, every thread of a block alive at once
template <class F>
void ktx_host_launch(unsigned grid, unsigned block, F&& body) {
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b) {
    std::barrier<> bar(static_cast<std::ptrdiff_t>(block));
    ktx_host_barrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, t] { threadIdx.x = t; blockIdx.x = b; body(); });
    for (auto& th : threads) th.join();
  }
}
