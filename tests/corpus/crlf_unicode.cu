// CORPUS: CRLF line endings, UTF-8 multi-byte text in comments and strings (byte offsets
// differ from character offsets: spans must stay byte-exact), a BOM-free file with a tab.
// EXPECT: kernels=crlf_kernel loops=1 launches=1 warnings=0 errors=0 defines=N_MAX:64
#define N_MAX 64
// Grüße, 你好, ε → δ: the kernel below must still be found at the right bytes.
__global__ void crlf_kernel(float* out, const char* tag) {
	const char* s = "λ-calculus ✓";
  for (int i = 0; i < N_MAX; ++i) {  // ünïcödé comment
    out[i] = tag[0] + s[0];
  }
}

void launch(float* out) { crlf_kernel<<<1, 1>>>(out, "α"); }
