; Every function definition, wherever it sits (namespaces, templates, extern "C").
(function_definition) @function
