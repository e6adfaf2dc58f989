// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// CTranslate2's dequantize epilogue: a block writes row i = blockIdx.x and reads its scales at
// `ta ? j : i` (the row's column, or the row's own scale), no __restrict__. The read lands in
// [0, depth) or at i: packs are taken where a run-time check finds the hull of both ranges apart
// from the row written (every thread of the block sees the same i, so all take the same path).
__global__ void dq(const int* c, const float* a_scales, const float* b_scales, bool ta, bool tb,
                   const float* bias, float* y, long depth) {
  const long i = blockIdx.x;
  for (long j = threadIdx.x; j < depth; j += blockDim.x) {
    const long index = i * depth + j;
    const float scale = a_scales[ta ? j : i] * b_scales[tb ? j : i];
    float v = c[index] * scale;
    if (bias)
      v = v + bias[j];
    y[index] = v;
  }
}
void run(const int* c, const float* a, const float* b, bool ta, bool tb, const float* bias, float* y, long n,
         long d) {
  dq<<<n, 256>>>(c, a, b, ta, tb, bias, y, d);
}

// CHECK: {{.*}}: remark: [vectorize] L0: rewritten: exposed VEC_L0 {1, 2, 4}; packed 2 pointer(s): c, y; y and a_scales may alias: packed only where a run-time check finds a_scales[(static_cast<long long>(0) < static_cast<long long>((i)) ? static_cast<long long>(0) : static_cast<long long>((i))) .. (static_cast<long long>((n)) > static_cast<long long>((i) + 1) ? static_cast<long long>((n)) : static_cast<long long>((i) + 1))) apart from the y elements the loop writes; y and b_scales may alias: packed only where a run-time check finds b_scales[(static_cast<long long>(0) < static_cast<long long>((i)) ? static_cast<long long>(0) : static_cast<long long>((i))) .. (static_cast<long long>((n)) > static_cast<long long>((i) + 1) ? static_cast<long long>((n)) : static_cast<long long>((i) + 1))) apart from the y elements the loop writes; y and bias may alias: packed only where a run-time check finds bias[(0) .. (0) + (n)) apart from the y elements the loop writes; c and y may alias: packed only where a run-time check finds them apart or the same
// CHECK: {{.*}}: remark: [vectorize] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
// CHECK: +
// CHECK: +
// CHECK: +// ktx:knobs begin
// CHECK: +// dq templated by `vectorize`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_VEC_L0
// CHECK: +#define KTX_VEC_L0 1  // vectorize: elements per packed access in loop L0 (1: scalar, as written; c: 4 B, y: 4 B)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_VEC_L0 > 1
// CHECK: +  // VEC_L0: packed accesses where every packed row is aligned (checked here); the
// CHECK: +  // scalar loop after the packed one takes the elements past the last whole pack.
// CHECK: +  const long ktx_packs_L0 = (ktx::apart(c + i * depth, y + i * depth, depth) &&
// CHECK: +                             (((static_cast<long long>((depth)) > static_cast<long long>((i) + 1) ? static_cast<long long>((depth)) : static_cast<long long>((i) + 1))) > ((static_cast<long long>(0) < static_cast<long long>((i)) ? static_cast<long long>(0) : static_cast<long long>((i)))) && (reinterpret_cast<unsigned long long>(y + i * depth) + sizeof(*y) * static_cast<unsigned long long>(depth) <= reinterpret_cast<unsigned long long>(a_scales + ((static_cast<long long>(0) < static_cast<long long>((i)) ? static_cast<long long>(0) : static_cast<long long>((i))))) || reinterpret_cast<unsigned long long>(a_scales + ((static_cast<long long>((depth)) > static_cast<long long>((i) + 1) ? static_cast<long long>((depth)) : static_cast<long long>((i) + 1)))) <= reinterpret_cast<unsigned long long>(y + i * depth))) &&
// CHECK: +                             (((static_cast<long long>((depth)) > static_cast<long long>((i) + 1) ? static_cast<long long>((depth)) : static_cast<long long>((i) + 1))) > ((static_cast<long long>(0) < static_cast<long long>((i)) ? static_cast<long long>(0) : static_cast<long long>((i)))) && (reinterpret_cast<unsigned long long>(y + i * depth) + sizeof(*y) * static_cast<unsigned long long>(depth) <= reinterpret_cast<unsigned long long>(b_scales + ((static_cast<long long>(0) < static_cast<long long>((i)) ? static_cast<long long>(0) : static_cast<long long>((i))))) || reinterpret_cast<unsigned long long>(b_scales + ((static_cast<long long>((depth)) > static_cast<long long>((i) + 1) ? static_cast<long long>((depth)) : static_cast<long long>((i) + 1)))) <= reinterpret_cast<unsigned long long>(y + i * depth))) &&
// CHECK: +                             (((0) + (depth)) > ((0)) && (reinterpret_cast<unsigned long long>(y + i * depth) + sizeof(*y) * static_cast<unsigned long long>(depth) <= reinterpret_cast<unsigned long long>(bias + ((0))) || reinterpret_cast<unsigned long long>(bias + ((0) + (depth))) <= reinterpret_cast<unsigned long long>(y + i * depth))) &&
// CHECK: +                             ktx::aligned<KTX_VEC_L0>(c + i * depth) &&
// CHECK: +                             ktx::aligned<KTX_VEC_L0>(y + i * depth)) ? depth / KTX_VEC_L0 : 0;
// CHECK: +  for (long ktx_p = threadIdx.x; ktx_p < ktx_packs_L0; ktx_p += blockDim.x) {
// CHECK: +    const auto ktx_c = ktx::load<KTX_VEC_L0>(c + i * depth + ktx_p * KTX_VEC_L0);
// CHECK: +    ktx::pack<float, KTX_VEC_L0> ktx_y;
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_j = 0; ktx_j < KTX_VEC_L0; ++ktx_j) {
// CHECK: +      const long j = ktx_p * KTX_VEC_L0 + ktx_j;
// CHECK: +      const long index = i * depth + j;
// CHECK: +      const float scale = a_scales[ta ? j : i] * b_scales[tb ? j : i];
// CHECK: +      float v = ktx_c.v[ktx_j] * scale;
// CHECK: +      if (bias)
// CHECK: +        v = v + bias[j];
// CHECK: +      ktx_y.v[ktx_j] = v;
// CHECK: +    }
// CHECK: +    ktx::store(y + i * depth + ktx_p * KTX_VEC_L0, ktx_y);
// CHECK: +  }
// CHECK: +  for (long j = ktx_packs_L0 * KTX_VEC_L0 + threadIdx.x; j < depth; j += blockDim.x) {
// CHECK: +    const long index = i * depth + j;
// CHECK: +    const float scale = a_scales[ta ? j : i] * b_scales[tb ? j : i];
// CHECK: +    float v = c[index] * scale;
// CHECK: +    if (bias)
// CHECK: +      v = v + bias[j];
// CHECK: +    y[index] = v;
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
