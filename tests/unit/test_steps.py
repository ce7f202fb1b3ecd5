"""Step and batch-size rules on hand-built traces."""
from __future__ import annotations

import numpy as np
import pytest

from launchgap.errors import InputError
from launchgap.loaders import load_trace
from launchgap.steps import DEFAULT_BATCH_REGEX, StepOptions, _batch_from_text, find_steps
from tests.unit.kineto_tiny import ann, cpu_op, kernel, launch, write
import re


@pytest.mark.parametrize("text, bs", [
    ("decode_step[bs=8]", 8), ("model_step batch_size=37", 37), ("bs=8", 8), ("batch 8", 8),
    ("batch_size: 16", 16), ("forward (batch=4)", 4), ("ProfilerStep#3", -1), ("absolute=9", -1),
])
def test_default_batch_pattern(text: str, bs: int) -> None:
    assert _batch_from_text([text], re.compile(DEFAULT_BATCH_REGEX))[0] == bs


def _two_steps(names=("decode_step[bs=8]", "decode_step[bs=16]")) -> list[dict]:
    ev = []
    for i, name in enumerate(names):
        t0 = i * 100.0
        ev += [ann(name, t0, 50.0), launch(t0 + 1, 2, corr=i + 1), kernel(t0 + 5, 10, corr=i + 1)]
    return ev


def test_annotation_steps_with_batch_sizes(tmp_path) -> None:
    steps = find_steps(load_trace(write(tmp_path, _two_steps())))
    assert steps.source == "annotation"
    assert steps.names == ["decode_step[bs=8]", "decode_step[bs=16]"]
    assert steps.batch_size.tolist() == [8, 16]
    assert steps.cpu_start_ns.tolist() == [0, 100_000]
    assert steps.cpu_end_ns.tolist() == [50_000, 150_000]


def test_profiler_step_wins_and_reads_batch_from_nested_annotation(tmp_path) -> None:
    ev = []
    for i in range(2):
        t0 = i * 100.0
        ev += [ann(f"ProfilerStep#{i + 3}", t0, 60.0), ann(f"model_step batch_size={37 + i}", t0 + 1, 50.0),
               launch(t0 + 2, 2, corr=i + 1), kernel(t0 + 5, 10, corr=i + 1)]
    steps = find_steps(load_trace(write(tmp_path, ev)))
    assert steps.source == "profiler-step"
    assert steps.names == ["ProfilerStep#3", "ProfilerStep#4"]
    assert steps.batch_size.tolist() == [37, 38]


def test_finer_annotations_beat_a_coarse_profiler_step(tmp_path) -> None:
    ev = [ann("ProfilerStep#1", 0.0, 400.0)] + _two_steps()
    steps = find_steps(load_trace(write(tmp_path, ev)))
    assert steps.source == "annotation" and len(steps) == 2


def test_nested_matches_count_once(tmp_path) -> None:
    ev = _two_steps() + [ann("decode_step inner", 10.0, 5.0)]
    steps = find_steps(load_trace(write(tmp_path, ev)))
    assert len(steps) == 2


def test_user_regex_and_batch_regex(tmp_path) -> None:
    ev = _two_steps(("iter n=3", "iter n=5"))
    t = load_trace(write(tmp_path, ev))
    steps = find_steps(t, StepOptions(step_regex=r"^iter", batch_regex=r"n=(\d+)"))
    assert steps.source == "user-regex" and steps.batch_size.tolist() == [3, 5]
    with pytest.raises(InputError, match="matches no annotation"):
        find_steps(t, StepOptions(step_regex="nothing-like-this"))
    with pytest.raises(InputError, match="bad --step-regex"):
        find_steps(t, StepOptions(step_regex="(unclosed"))


def test_graph_launch_steps_without_markers(tmp_path) -> None:
    ev = []
    for i in range(3):
        t0 = i * 100.0
        ev += [launch(t0, 5, corr=i + 1, name="cudaGraphLaunch"), kernel(t0 + 6, 10, corr=i + 1),
               kernel(t0 + 17, 10, corr=i + 1)]
    steps = find_steps(load_trace(write(tmp_path, ev)))
    assert steps.source == "graph-launch" and len(steps) == 3
    assert steps.batch_size.tolist() == [-1, -1, -1]


def test_whole_trace_window_without_markers(tmp_path) -> None:
    ev = [launch(0, 2, 1), kernel(5, 10, 1), launch(20, 2, 2), kernel(30, 10, 2)]
    steps = find_steps(load_trace(write(tmp_path, ev)))
    assert steps.source == "whole-trace" and len(steps) == 1
    assert steps.cpu_start_ns.tolist() == [0] and steps.cpu_end_ns.tolist() == [40_000]


def test_batch_from_op_input_shapes(tmp_path) -> None:
    ev = []
    for i, bs in enumerate((4, 12)):
        t0 = i * 100.0
        ev += [ann("step", t0, 50.0), cpu_op("aten::embedding", t0 + 1, 3, dims=[[32000, 64], [bs, 1]]),
               launch(t0 + 2, 2, corr=i + 1), kernel(t0 + 5, 10, corr=i + 1)]
    t = load_trace(write(tmp_path, ev))
    # By default the token ids fed to the embedding give the batch size...
    assert find_steps(t).batch_size.tolist() == [4, 12]
    assert find_steps(t, StepOptions(batch_op="aten::embedding:1:0")).batch_size.tolist() == [4, 12]
    # ...a chosen op replaces the defaults, and ARG/DIM pick the number.
    assert find_steps(t, StepOptions(batch_op="aten::embedding:0:1")).batch_size.tolist() == [64, 64]
    with pytest.raises(InputError):
        find_steps(t, StepOptions(batch_op="aten::embedding:x"))
    assert np.all(find_steps(t, StepOptions(batch_op="aten::missing")).batch_size == -1)


def test_batch_from_logits_argmax_when_no_embedding(tmp_path) -> None:
    ev = [ann("ProfilerStep#1", 0, 50), cpu_op("aten::argmax", 1, 3, dims=[[16, 32000], [], []]),
          launch(2, 2, corr=1), kernel(5, 10, corr=1)]
    assert find_steps(load_trace(write(tmp_path, ev))).batch_size.tolist() == [16]
