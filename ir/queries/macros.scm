; Object-like and function-like #define directives.
[
  (preproc_def name: (identifier) @name) @define
  (preproc_function_def name: (identifier) @name) @define
]
