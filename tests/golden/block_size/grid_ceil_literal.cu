// RUN: ktx apply --passes block-size --kernel add_one %s --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=ONE
// RUN: ktx apply --passes block-size --kernel add_two %s --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=TWO
// RUN: ktx apply --passes block-size --kernel add_three %s --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=THREE
// A literal block whose grid rounds up a division by the same literal: the grid's copies
// follow the knob, 255 as the knob minus one, so the blocks still cover n. A grid that divides
// without rounding up (``n / 128``) would drop the tail for a larger block: it refuses.
__global__ void add_one(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.f;
}
__global__ void add_two(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 2.f;
}
__global__ void add_three(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 3.f;
}

void launch(float* x, int n) {
  add_one<<<(n + 255) / 256, 256>>>(x, n);
  dim3 block(1024);
  dim3 grid((n - 1) / 1024 + 1);
  add_two<<<grid, block>>>(x, n);
  add_three<<<n / 128, 128>>>(x, n);
}

// ONE: {{.*}}: remark: [block-size] add_one: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}; the grid's rounding up by 256 follows the knob (line 21); launch mapping: 256 -> BLOCK_X in grid[0], block[0]
// ONE: -  add_one<<<(n + 255) / 256, 256>>>(x, n);
// ONE: +  add_one<<<(n + (KTX_PICK(KTX_BLOCK_X, (256)) - 1)) / KTX_PICK(KTX_BLOCK_X, (256)), KTX_PICK(KTX_BLOCK_X, (256))>>>(x, n);
// TWO: {{.*}}: remark: [block-size] add_two: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}; the grid's rounding up by 1024 follows the knob (line 24); launch mapping: 1024 -> BLOCK_X in grid[0], block[0]
// TWO: -  dim3 block(1024);
// TWO: -  dim3 grid((n - 1) / 1024 + 1);
// TWO: +  dim3 block(KTX_PICK(KTX_BLOCK_X, (1024)));
// TWO: +  dim3 grid((n - 1) / KTX_PICK(KTX_BLOCK_X, (1024)) + 1);
// THREE: {{.*}}: remark: [block-size] add_three: skipped: the grid repeats the block's literal 128 (line 25); name it (a constexpr) or run expose first, so both follow the knob
