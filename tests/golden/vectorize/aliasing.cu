// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// Without __restrict__, out may overlap in (out = in + 1 makes each iteration read what the
// previous one wrote), and packing the loads ahead of the stores would change the result. Both are
// indexed alike, so a run-time check decides: packs where the two ranges are the same elements
// or disjoint, the scalar loop (the original order) otherwise.
__global__ void shift_add(float* out, const float* in, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = in[i] + 1.f;
  }
}

// CHECK: {{.*}}: remark: [vectorize] L0: rewritten: exposed VEC_L0 {1, 2, 4}; packed 2 pointer(s): in, out; out and in may alias: packed only where a run-time check finds them apart or the same
// CHECK: +__device__ __forceinline__ bool apart(const T* p, const U* q, long long n) {
// CHECK: +  const int ktx_packs_L0 = (ktx::apart(out, in, n) &&
// CHECK-NEXT: +                            ktx::aligned<KTX_VEC_L0>(out) &&
// CHECK-NEXT: +                            ktx::aligned<KTX_VEC_L0>(in)) ? n / KTX_VEC_L0 : 0;
// CHECK: +  for (int i = ktx_packs_L0 * KTX_VEC_L0 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
// CHECK-NEXT: +    out[i] = in[i] + 1.f;
