// RUN: ktx inspect --facts %s | filecheck %s --match-full-lines
// Who owns which iterations: blocks walk rows (row += gridDim.x), lanes of a warp a row, one
// thread a whole loop; refusals name the construct (a break, a condition that is not i < n).
__global__ void owners(float* out, const float* in, int rows, int cols) {
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    for (int c = threadIdx.x % 32; c < cols; c += 32) out[row * cols + c] = in[row * cols + c];
  }
  for (int k = 0; k < cols; ++k) {
    if (in[k] < 0.f) break;
    out[k] = in[k];
  }
  for (int j = threadIdx.x; j != cols; j += blockDim.x) out[j] = 0.f;
}

void go(float* o, const float* x, int rows, int cols) { owners<<<rows, 256>>>(o, x, rows, cols); }

// CHECK: kernel owners (line 4)
// CHECK:   launch: line 15 <<<rows, 256>>>
// CHECK:   loop L0 line 5 depth 0: row from blockIdx.x step gridDim.x while row < rows; owner blocks, partitions
// CHECK:   loop L1 line 6 depth 1: c from (threadIdx.x % 32) step 32 while c < cols; owner warp
// CHECK:   loop L2 line 8 depth 0: k from 0 step 1 while k < cols; owner thread
// CHECK:   loop L3 line 12 depth 0: j from threadIdx.x step blockDim.x while j != cols; owner block, partitions
// CHECK:   ref line 6: store out[row * cols + c] root out index c + cols*row elt float 4B unconditional alias global loop L1
// CHECK:   ref line 6: load in[row * cols + c] root in index c + cols*row elt float 4B unconditional alias global loop L1
// CHECK:   ref line 9: load in[k] root in index k elt float 4B unconditional alias global loop L2
// CHECK:   ref line 10: store out[k] root out index k elt float 4B unconditional alias global loop L2
// CHECK:   ref line 10: load in[k] root in index k elt float 4B unconditional alias global loop L2
// CHECK:   ref line 12: store out[j] root out index j elt float 4B unconditional alias global loop L3
// CHECK:   pack L0: no, aliasing: out[row * cols + c] and in[row * cols + c] may touch aliasing memory (line 6 and 6)
// CHECK:   pack L1: no, out is also accessed at line 10 with no __syncthreads() in between; packs change which thread owns each element
// CHECK:   pack L2: no, the body has a `break`: packs cannot stop mid-way
// CHECK:   pack L3: no, the loop condition `j != cols` is not `j < n`
