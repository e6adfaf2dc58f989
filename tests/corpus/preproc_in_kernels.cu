// CORPUS: an image filter in the shape the CUDA samples take (a Sobel edge filter over a shared
// tile): preprocessor conditionals inside kernels. A parameter that exists only without a
// feature macro, an architecture test that adds half of an expression, a `for` header chosen
// per branch, whole-statement branches (parsed as they are), a parameter (and its comma) only
// with a texture option, and a kernel with none. Each split group is a warning naming its
// line; every kernel is indexed; nothing is an error.
// EXPECT: kernels=edge_tile,edge_rows,edge_pairs,edge_invert,edge_pad loops=3 launches=1 warnings=4 errors=0
// EXPECT: defines=RADIUS:1,TILE_W:16
#include <cuda_runtime.h>

#define RADIUS 1
#define TILE_W 16

__device__ unsigned char edge_strength(float gx, float gy, float scale) {
  float s = scale * (fabsf(gx) + fabsf(gy));
  return (unsigned char)(s > 255.f ? 255.f : s);
}

__global__ void edge_tile(unsigned char* out, const unsigned char* in, int pitch,
#ifndef FIXED_TILE
                          short tile_w, short tile_pitch,
#endif
                          short w, short h, float scale) {
  extern __shared__ unsigned char tile[];
#ifdef FIXED_TILE
  short tile_w = FIXED_TILE;
  short tile_pitch = tile_w + 2 * RADIUS;
#endif
  int u = blockIdx.x * tile_w;
  int v = blockIdx.y;
  for (int i = threadIdx.x; i < tile_w + 2 * RADIUS; i += blockDim.x) {
    tile[i] = in[v * pitch + u + i];
  }
  __syncthreads();
  float gain = scale
#if __CUDA_ARCH__ >= 800
               * 0.5f
#endif
      ;
  if (threadIdx.x < tile_w && u + threadIdx.x < w && v < h) {
    float gx = (float)tile[threadIdx.x + 2] - (float)tile[threadIdx.x];
    out[v * pitch + u + threadIdx.x] = edge_strength(gx, 0.f, gain);
  }
}

__global__ void edge_rows(unsigned char* out, const unsigned char* in, int w, int h) {
  int y = blockIdx.x;
#if defined(EDGE_WIDE_ROWS) && __CUDA_ARCH__ >= 700
  for (int x = threadIdx.x; x < w; x += 2 * blockDim.x) {
#else
  for (int x = threadIdx.x; x < w; x += blockDim.x) {
#endif
    out[y * w + x] = in[y * w + x] > 128 ? 255 : 0;
  }
}

__global__ void edge_pairs(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
#if __CUDA_ARCH__ >= 800
  float a = __ldg(&in[i]);
#else
  float a = in[i];
#endif
  for (int k = 0; k < TILE_W; ++k) a = a * 0.5f + 1.f;
  out[i] = a;
}

__global__ void edge_invert(unsigned char* img, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) img[i] = 255 - img[i];
}

__global__ void edge_pad(float* dst, const float* src, int h, int w
#if (EDGE_USE_TEXTURE)
                         ,
                         cudaTextureObject_t tex
#endif
) {
  const int x = blockDim.x * blockIdx.x + threadIdx.x;
  if (x < w) dst[x] = src[x] + (float)h;
}

void launch_edge_invert(unsigned char* img, int n) { edge_invert<<<(n + 255) / 256, 256>>>(img, n); }
