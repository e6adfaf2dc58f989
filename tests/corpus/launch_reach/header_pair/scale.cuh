#pragma once
// The kernel is defined in a header; scale.cu includes it and launches it.
__global__ void scale(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
