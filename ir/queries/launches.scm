; Triple-chevron launches: name<targs><<<grid, block, smem, stream>>>(args).
(call_expression
  function: (_) @callee
  (kernel_call_syntax) @config
  arguments: (argument_list) @args) @launch
