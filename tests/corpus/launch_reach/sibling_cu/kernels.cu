#include "kernels.cuh"

template <typename T, int BLOCK>
__global__ void quant(const T* __restrict__ a, unsigned char* out, float* absmax, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) {
    float v = (float)a[i];
    out[i] = (unsigned char)(v > 0.f ? v : -v);
    if (threadIdx.x == 0) absmax[blockIdx.x] = v;
  }
}

template __global__ void quant<float, 256>(const float* __restrict__, unsigned char*, float*, int);
