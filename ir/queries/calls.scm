; Every call expression of a file (launch wrappers and launching helpers are found among them).
(call_expression) @call
