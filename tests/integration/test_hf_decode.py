"""A decode loop we did not write (HF transformers' generate): steps, batch size from shapes, modes."""
from __future__ import annotations

from launchgap.loaders import load_trace
from launchgap.report import analyze_trace


def test_eager_generate(reference_traces) -> None:
    rep = analyze_trace(load_trace(reference_traces / "hf-llama" / "hf_llama_eager_bs16.json.gz"))
    s = rep.summary
    assert rep.mode == "eager" and s.steps == 5 and s.step_source == "profiler-step"
    assert s.batch_sizes == [16]  # from aten::embedding's token ids: no annotation names it
    assert s.verdict == "launch-bound"
    assert s.gpu_busy_us_median < s.predicted_graph_step_us_median < s.step_us_median


def test_compiled_generate_is_mixed(reference_traces) -> None:
    rep = analyze_trace(load_trace(reference_traces / "hf-llama" / "hf_llama_static-compiled_bs16.json.gz"))
    s = rep.summary
    assert rep.mode == "mixed" and s.steps == 5
    assert s.graph_launches_per_step_median == 1
    assert s.residual_eager_launches_per_step_median == s.kernel_launches_per_step_median > 0
    assert s.batch_sizes == [16]  # from argmax over the logits: the embedding runs inside the graph
