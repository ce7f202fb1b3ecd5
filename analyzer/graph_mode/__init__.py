"""How much of a trace, and of each step, runs from CUDA graphs; and whether it is a capture trace.

* **Trace mode** (:func:`classify_mode`): ``eager`` (no graph launches; ``compiled`` when
  torch.compile ran, :func:`compile_evidence`), ``graph`` (graph
  launches, and eager kernel launches are at most :data:`RESIDUAL_EAGER_FRACTION` of the kernels
  per step; those are reported as residual eager launches) or ``mixed`` (graph launches plus more
  eager launches in the same steps, as with piecewise graphs or torch.compile graph trees), from
  the per-step medians. A **capture** trace (:func:`detect_capture`) is named ``capture``.
* **Graph coverage of a step** (:func:`step_coverage`): ``full`` when the step launched at least
  one graph and its eager kernels are at most :data:`RESIDUAL_EAGER_FRACTION` of its kernels
  (graph-replayed plus eager); ``piecewise`` when it launched graphs with more eager kernels
  (vLLM's piecewise mode for mixed batches, torch.compile piecewise graphs); ``eager`` when it
  launched none. When a replay is recorded as one whole-graph op (Nsight Systems' default
  graph-level tracing) its kernels are unknown; such a step is ``piecewise`` when an eager kernel
  was launched between its first and last graph launch, else ``full``.
* **Capture trace**: launches recorded into graphs during stream capture run nothing. A trace is
  a capture trace when it shows capture (``cudaStreamBeginCapture``/``cudaGraphInstantiate`` or
  their HIP/driver names, an engine's capture range such as vLLM's ``capture_32_FULL``, or
  ``torch.cuda.CUDAGraph.capture_begin`` in a ``with_stack`` trace) and at least
  :data:`CAPTURE_UNRUN_FRACTION` of its kernel launches have no GPU op with their correlation id.
  Per graph: the kernel launches between ``BeginCapture`` and ``EndCapture`` on the capturing
  thread (the nodes recorded) and the size the engine's capture range names.

The package, one module per concern:

* :mod:`.coverage`: trace mode, per-step graph coverage, capture-trace detection;
* :mod:`.serving`: graph-mode serving (capture sizes, buckets, padded rows and their cost curve,
  fallbacks and their causes);
* :mod:`.pairing`: a capture trace paired with an execution trace (what runs inside each replay);
* :mod:`.assembly`: graph-mode serving of one analysed trace, assembled from its steps' columns (imported as
  ``launchgap.graph_mode.assembly``: it uses the cost curve, which the package itself does not need).
"""
from .coverage import CAPTURE_UNRUN_FRACTION, COVERAGES, INDUCTOR_KERNEL_SHARE, RESIDUAL_EAGER_FRACTION, \
    CaptureReport, StepCoverage, classify_mode, compile_evidence, detect_capture, graph_trees_marker, step_coverage
from .pairing import MATCHED_BY, CapturedNodes, CapturePairing, captured_nodes, pair_capture
from .serving import BUCKET_REGEX, CAPTURE_SOURCES, EAGER_MARKER_REGEX, INFERRED_PADDING_REASON, PaddingCost, \
    ServingSteps, capture_list_conflict, fallback_causes, marker_buckets, padding_cost, resolve_capture_sizes, serving_steps, \
    smallest_size_at_least

__all__ = ["BUCKET_REGEX", "CAPTURE_SOURCES", "CAPTURE_UNRUN_FRACTION", "COVERAGES", "EAGER_MARKER_REGEX",
           "INDUCTOR_KERNEL_SHARE", "INFERRED_PADDING_REASON", "MATCHED_BY", "RESIDUAL_EAGER_FRACTION",
           "CaptureReport", "CapturePairing", "CapturedNodes", "PaddingCost", "ServingSteps",
           "StepCoverage", "capture_list_conflict", "captured_nodes", "classify_mode", "compile_evidence", "detect_capture", "fallback_causes",
           "graph_trees_marker",
           "marker_buckets", "padding_cost", "pair_capture", "resolve_capture_sizes",
           "serving_steps", "smallest_size_at_least", "step_coverage"]
