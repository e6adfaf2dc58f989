// CORPUS: #define integer constants (decimal, hex, shifted, parenthesized, built from other
// macros, with suffixes, sizeof), non-integer macros (float, string, expression of runtime
// values, function-like), constexpr ints computed from other constants and macros, static
// constexpr in a kernel, const ints, and constants used as launch sizes.
// EXPECT: kernels=fill loops=1 launches=2 warnings=0 errors=0
// EXPECT: defines=BLOCK:256,WARPS:8,SMEM_BYTES:4096,MASK:4095,FLAGS:48,BIG:1048576,PAIR:8,EPS:none,NAME:none,TID:none,CEIL:none
// EXPECT: constexprs=kWarp:32,kWarps:8,kThreads:256,kTiles:3,kRows:16,kBytes:64,kNeg:-4,kItems:4
#include <cstdint>

#define BLOCK 256
#define WARPS (BLOCK / 32)
#define SMEM_BYTES (WARPS * 512)
#define MASK 0xFFF
#define FLAGS (3 << 4)
#define BIG 1048576u
#define PAIR (2 * sizeof(float))
#define EPS 1e-6f
#define NAME "fill"
#define TID (threadIdx.x + blockIdx.x * blockDim.x)
#define CEIL(a, b) (((a) + (b) - 1) / (b))

constexpr int kWarp = 32;
constexpr int kWarps = BLOCK / kWarp;
constexpr int kThreads = kWarps * kWarp;
constexpr unsigned kTiles = (kThreads + 127) / 128 + 1;
static constexpr int kRows{16};
const int kBytes = 16 * sizeof(float);
constexpr int kNeg = -(1 << 2);

__global__ void __launch_bounds__(BLOCK) fill(float* out, int n) {
  static constexpr int kItems = 4;
  for (int i = TID * kItems; i < n; i += BLOCK * gridDim.x * kItems) out[i] = 1.f;
}

void launch(float* out, int n, cudaStream_t stream) {
  fill<<<CEIL(n, BLOCK * 4), BLOCK, SMEM_BYTES, stream>>>(out, n);
  fill<<<dim3(kTiles, kRows), kThreads>>>(out, n);
}
