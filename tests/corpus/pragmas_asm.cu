// CORPUS: #pragma unroll (bare, with N, with a constant expression, unroll 1, with a comment
// between pragma and loop), a pragma that is not about unrolling, asm volatile with outputs,
// inputs and clobbers, PTX in a device function, and loops nested three deep.
// EXPECT: kernels=unrolled device=lane_id,ld_nc loops=7 launches=0 warnings=0 errors=0
// EXPECT: unroll=-,4,UNROLL,1,(2*2),none,none defines=UNROLL:8
#define UNROLL 8

__device__ __forceinline__ unsigned lane_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}

__device__ __forceinline__ float4 ld_nc(const float4* p) {
  float4 v;
  asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__global__ void unrolled(float* __restrict__ out, const float* __restrict__ in, int n) {
  float acc[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) acc[i] = 0.f;
#pragma unroll 4
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
#pragma unroll UNROLL
    for (int j = 0; j < UNROLL; ++j) {
#pragma unroll 1
      for (int k = 0; k < 2; k++) acc[(j + k) % 16] += in[i] * (j + k);
    }
  }
  #pragma unroll (2 * 2)
  // a comment between the pragma and its loop
  for (int i = 0; i < 4; i += 1) acc[i] *= 2.f;
#pragma nv_diag_suppress 177
  for (int i = 0; i < 16; ++i) out[threadIdx.x * 16 + i] = acc[i];
  int s = 0;
  while (s < 3) {
    asm volatile("" ::: "memory");
    ++s;
  }
}
