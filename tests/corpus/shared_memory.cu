// CORPUS: extern __shared__ arrays (plain, with __align__(16), with __align__(alignof(T)), of
// a template type), static __shared__ 1-D/2-D/3-D arrays sized by #define, constexpr and
// template params, a shared scalar, __shared__ in a device function, and a padded tile.
// EXPECT: kernels=transpose,dyn_smem,typed_smem device=stage loops=2 launches=1
// EXPECT: shared=scratch,tile,flag,buf,raw,aligned,typed,cube warnings=0 errors=0
// EXPECT: defines=TILE:32,ROWS:8 constexprs=kPad:1
#define TILE 32
#define ROWS 8

constexpr int kPad = 1;

struct alignas(16) Storage { float v[4]; };

__device__ void stage(float* dst, const float* src) {
  __shared__ float scratch[TILE];
  scratch[threadIdx.x % TILE] = src[threadIdx.x];
  __syncthreads();
  dst[threadIdx.x] = scratch[(threadIdx.x + 1) % TILE];
}

__global__ void transpose(float* __restrict__ out, const float* __restrict__ in, int w, int h) {
  __shared__ float tile[TILE][TILE + kPad];
  __shared__ int flag;
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
  flag = 1;
}

__global__ void dyn_smem(float* out) {
  extern __shared__ float buf[];
  extern __shared__ char raw[];
  extern __shared__ __align__(16) unsigned char aligned[];
  buf[threadIdx.x] = raw[0] + aligned[0];
  out[threadIdx.x] = buf[threadIdx.x];
}

template <typename T, int D>
__global__ void typed_smem(T* out) {
  extern __shared__ __align__(alignof(Storage)) T typed[];
  __shared__ T cube[D][2][4];
  typed[threadIdx.x] = cube[0][0][0];
  out[0] = typed[0];
}

void launch_transpose(float* out, const float* in, int w, int h, cudaStream_t s) {
  dim3 block(TILE, ROWS);
  dim3 grid(w / TILE, h / TILE);
  transpose<<<grid, block, 0, s>>>(out, in, w, h);
}
