; Declarations that may carry constexpr integers or __shared__ arrays; filtered in Python.
(declaration) @decl
(field_declaration) @decl
