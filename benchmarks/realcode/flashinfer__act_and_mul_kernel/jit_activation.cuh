// What FlashInfer's Python JIT writes into the act_and_mul launcher it generates (the fetched
// sources hold no such function): the activation the kernel's `Activation` template argument
// names. Written for ktx's benchmark, not taken from the project: SiLU, x * sigmoid(x), with
// the fast exponential a CUDA build of it uses.
__device__ __forceinline__ float silu(const float& x) {
  const float sigmoid = 1.0f / (1.0f + __expf(-x));
  return x * sigmoid;
}
