; Triple-chevron launches: name<targs><<<grid, block, smem, stream>>>(args).
(call_expression
  function: (_) @callee
  (kernel_call_syntax) @config
  arguments: (argument_list) @args) @launch
; Runtime-API launches: cudaLaunchKernel(k, grid, block, args, smem, stream) and
; cudaLaunchKernelEx(&config, k, args...), cudaLaunchCooperativeKernel(...).
(call_expression
  function: (identifier) @api
  arguments: (argument_list)
  (#match? @api "^cudaLaunch(Kernel|KernelEx|CooperativeKernel)$")) @api_launch
