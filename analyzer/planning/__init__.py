"""Capture planning: which batch sizes to capture as CUDA graphs, and what that costs.

One module per concern, each a layer over the one before:

* :mod:`~analyzer.planning.costs`: the cost model (:class:`CostTable`: step cost per batch
  size, eager and graph, monotone);
* :mod:`~analyzer.planning.inputs`: readers that build its inputs from harness timings,
  distribution files and analysed traces;
* :mod:`~analyzer.planning.planner`: the exact bucket-set optimisation and the plan.

Nothing here prints; the ``plan`` command and the dashboard render plans.
"""
