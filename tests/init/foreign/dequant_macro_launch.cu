// A launcher template whose launch sits in a #define body (DeepSpeed's LAUNCH_* macros): grid and
// block are locals of the function where the macro expands, here through a second macro that
// picks the unroll; the function is a template, so its definition starts at `template <...>`.
#include <cstdint>

template <typename T, int unroll, int threads>
__global__ void dequant(T* out, const int8_t* q, const float* scales, int group, int total) {
  const int i = (blockIdx.x * threads + threadIdx.x) * unroll;
  for (int u = 0; u < unroll; u++) {
    if (i + u < total) out[i + u] = T(q[i + u] * scales[(i + u) / group]);
  }
}

#define LAUNCH_DEQUANT(UNROLL) dequant<T, UNROLL, threads><<<grid, block, 0, stream>>>(out, q, scales, group, total);

#define LAUNCH_FOR_WIDTH(WIDE) \
  if (WIDE) {                  \
    LAUNCH_DEQUANT(8)          \
  } else {                     \
    LAUNCH_DEQUANT(4)          \
  }

template <typename T>
void launch_dequant(T* out, const int8_t* q, const float* scales, int group, int total, bool wide,
                    cudaStream_t stream) {
  constexpr int threads = 256;
  const dim3 block(threads);
  const dim3 grid((total + threads * 8 - 1) / (threads * 8));
  LAUNCH_FOR_WIDTH(wide);
}

template void launch_dequant(float*, const int8_t*, const float*, int, int, bool, cudaStream_t);
