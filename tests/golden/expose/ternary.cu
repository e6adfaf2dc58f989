// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes expose %s --knobs -q | filecheck %s --check-prefix=KNOBS
// A launch literal written twice in the expression it sets: both copies follow the knob, so the
// launcher ships min(d, BLOCK), the mapping ktx measures (not d < BLOCK ? d : 1024).
__global__ void scale(float* out, const float* in, int d) {
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[blockIdx.x * d + i] = 2.f * in[blockIdx.x * d + i];
}

void launch(float* out, const float* in, int tokens, int d) {
  dim3 block(d < 1024 ? d : 1024);
  scale<<<tokens, block>>>(out, in, d);
}

// CHECK: {{.*}}: remark: [expose] BLOCK: rewritten: exposed BLOCK {256, 512, 1024}; all 2 copies of 1024 in that expression (col 18, col 29) follow BLOCK; launch mapping: 1024 -> BLOCK in block[0]
// CHECK: {{.*}}: remark: [expose] BLOCK: skipped: 1024 follows BLOCK, the same literal in the same expression
// CHECK: +// ktx:knobs begin
// CHECK: +// scale templated by `expose`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK
// CHECK: +#define KTX_BLOCK 1024  // expose: launch literal for scale@10:18 (was 1024)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  dim3 block(d < 1024 ? d : 1024);
// CHECK: +  dim3 block(d < KTX_BLOCK ? d : KTX_BLOCK);
// KNOBS: {
// KNOBS:   "kernel": "scale",
// KNOBS:   "pipeline": "expose",
// KNOBS:   "knobs": [
// KNOBS:     {"name": "BLOCK", "values": [256, 512, 1024], "default": 1024, "help": "launch literal for scale@10:18 (was 1024)", "pass": "expose", "site": "BLOCK"}
// KNOBS:   ],
// KNOBS:   "constraints": [],
// KNOBS:   "launch": {"grid": ["tokens"], "block": ["d if d < BLOCK else BLOCK"], "shared": "0"},
// KNOBS:   "name_expression": "scale",
// KNOBS:   "template_args": []
// KNOBS: }
