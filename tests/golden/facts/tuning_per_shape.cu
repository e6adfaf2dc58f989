// RUN: ktx inspect --facts %s | filecheck %s --match-full-lines
// DeepSpeed's pattern: UNROLL counts block-strided steps over the row (stride = blockDim.x * 8
// halves), each guarded by a predicate the loads take and an if around the store; the launcher
// picks UNROLL by the row's length through a dispatch macro (1 * internalUnroll, 2 * ...), so the
// facts read the values it instantiates (2, 4 for __half) and the step a value covers.
#include <cuda_fp16.h>

template <int N>
__device__ void load_global(__half* dst, const __half* src, bool ok) {
  for (int j = 0; j < N; j++) dst[j] = ok ? src[j] : __half(0);
}

typedef __half T;  // (ktx reads sizeof of a template argument or a built-in type, not of a typedef)

template <int UNROLL>
__global__ void scale_rows(T* out, const T* in, float s, int elems_per_row) {
  constexpr int T_per_load = 16 / sizeof(__half);
  const int base = blockIdx.x * elems_per_row + threadIdx.x * T_per_load;
  const int stride = blockDim.x * T_per_load;
  T buf[UNROLL * T_per_load];
#pragma unroll
  for (int i = 0; i < UNROLL; i++) {
    T* it = buf + i * T_per_load;
    const int off = i * stride + threadIdx.x * T_per_load;
    const bool do_loads = off < elems_per_row;
    load_global<T_per_load>(it, in + base + i * stride, do_loads);
    for (int j = 0; j < T_per_load; j++) it[j] = it[j] * (T)s;
    if (do_loads) {
      for (int j = 0; j < T_per_load; j++) out[base + i * stride + j] = it[j];
    }
  }
}

#define LAUNCH_SCALE(UNROLL) scale_rows<UNROLL><<<rows, 256, 0, stream>>>(out, in, s, elems_per_row);

void launch_scale(T* out, const T* in, float s, int rows, int elems_per_row, cudaStream_t stream) {
  constexpr int internalUnroll = sizeof(__half) == 4 ? 4 : 2;
  if (elems_per_row <= 4096) {
    LAUNCH_SCALE(1 * internalUnroll);
  } else {
    LAUNCH_SCALE(2 * internalUnroll);
  }
}

// CHECK: kernel scale_rows (line 15)
// CHECK:   launch: line 34 <<<rows, 256>>> template <UNROLL>
// CHECK:   template args: UNROLL
// CHECK:   setting: UNROLL template-int items = ? (named as items per thread)
// CHECK:   setting UNROLL: the file instantiates 2, 4
// CHECK:   setting UNROLL: covers UNROLL x step 8 * (blockDim.x) of elems_per_row, past it guarded (line 25)
// CHECK:   setting: T_per_load constexpr items = 8 (a loop bound)
// CHECK:   loop L1 line 22 depth 0: i from 0 step 1 while i < UNROLL; owner thread
// CHECK:   loop L2 line 27 depth 1: j from 0 step 1 while j < 8; owner thread
// CHECK:   loop L3 line 29 depth 1: j from 0 step 1 while j < 8; owner thread
// CHECK:   ref line 29: store out[base + i * stride + j] root out index 8*blockDim.x*i + blockIdx.x*elems_per_row + j + 8*threadIdx.x elt T 2B conditional alias global loop L3
// CHECK:   pack L1: no, the body writes it[j], which is not element i of a row; packs would change which thread writes it
// CHECK:   pack L2: no, the body writes the per-thread array it declared outside the loop
// CHECK:   pack L3: out (2B)
