; Loops a pass may rewrite. Range-based for loops are indexed too, with no induction step.
[
  (for_statement)
  (while_statement)
  (do_statement)
  (for_range_loop)
] @loop
