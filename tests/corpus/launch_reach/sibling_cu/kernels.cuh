#pragma once
// Declared here, defined in kernels.cu, launched from ops.cu (bitsandbytes' layout).
template <typename T, int BLOCK>
__global__ void quant(const T* __restrict__ a, unsigned char* out, float* absmax, int n);
