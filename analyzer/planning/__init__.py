"""Capture planning: which batch sizes to capture as CUDA graphs, and what that costs.

One module per concern, each a layer over the one before:

* :mod:`~launchgap.planning.costs`: the cost model (:class:`CostTable`: step cost per batch
  size, eager and graph, monotone);
* :mod:`~launchgap.planning.inputs`: readers that build its inputs from harness timings,
  distribution files, analysed traces, model dimensions and graph-memory recordings;
* :mod:`~launchgap.planning.memory`: graph memory and capture time of a capture list (a model
  fitted on the harness's recordings; ``python -m launchgap.planning.memory fit`` refits it);
* :mod:`~launchgap.planning.planner`: the exact bucket-set optimisation under graph-count,
  memory and capture-time budgets, and the plan;
* :mod:`~launchgap.planning.request`: the one way a plan is built (:class:`PlanRequest`, role-tagged
  inputs, :func:`build_plan`), used by the ``plan`` and ``fleet`` commands and the dashboard.

Nothing here prints; the ``plan`` command and the dashboard render plans.
"""
