"""Eager vs graph traces paired by batch size, for the Compare page.

Per (mode, batch size) the table takes medians over all steps of that batch size in the
loaded traces of that mode; the traces should be of one workload (one model on one device:
the Compare page picks one with :func:`launchgap.dashboard.workloads.pick_workload_entries`). Step times are
the analyzer's unprofiled estimates per step
(:meth:`launchgap.predict.PredictionModel.unprofiled_step_us`: the profiled step less the
profiler's cost per host event for the profiler settings each trace shows, its summary's
``profiler_overhead_us_per_event``, and with Python stacks its cost per Python call past the host events' share,
``profiler_python_call_us``, never below the GPU busy time), so eager and graph traces
compare like for like. A helper like this could live in :mod:`analyzer` (the planner's
``costs_from_steps`` covers the same ground); it stays here until then.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from launchgap.overhead import python_calls_priced
from launchgap.predict import PredictionModel
from launchgap.report import TraceReport

TABLE_COLUMNS = ("batch_size", "eager_traces", "eager_steps", "eager_step_profiled_us", "eager_step_us",
                 "eager_busy_us", "eager_idle_fraction", "predicted_graph_us", "predicted_speedup",
                 "graph_traces", "graph_steps", "graph_step_us", "graph_busy_us", "graph_idle_fraction",
                 "measured_speedup")


def step_rows(reports: Sequence[tuple[str, TraceReport]], model: PredictionModel) -> pd.DataFrame:
    """One row per decode step (or step of unknown phase) with a known batch size: trace name, mode,
    batch size and its times (us)."""
    rows = []
    for name, rep in reports:  # per trace, then per step: report rows, not events
        for st in rep.steps:
            if st.batch_size is None or st.phase not in ("decode", None):  # a prefill is not a decode bucket
                continue
            rows.append({"trace": name, "mode": rep.mode, "batch_size": st.batch_size, "step_profiled_us": st.dur_us,
                         "host_events": st.host_events, "busy_us": st.gpu_busy_us, "idle_us": st.gpu_idle_us,
                         "predicted_graph_us": st.predicted_graph_us,
                         "us_per_event": rep.summary.profiler_overhead_us_per_event,
                         "python_us": rep.summary.profiler_python_call_us * float(python_calls_priced(
                             st.python_calls, st.host_events, model.overhead.python_calls_per_event))})
    df = pd.DataFrame(rows, columns=["trace", "mode", "batch_size", "step_profiled_us", "host_events", "busy_us",
                                     "idle_us", "predicted_graph_us", "us_per_event", "python_us"])
    df["step_us"] = model.unprofiled_step_us(df["step_profiled_us"].to_numpy(float),
                                             df["host_events"].to_numpy(float), df["busy_us"].to_numpy(float),
                                             df["us_per_event"].to_numpy(float),
                                             python_us=df["python_us"].to_numpy(float))
    return df


def _side(df: pd.DataFrame, prefix: str) -> pd.DataFrame:
    g = df.groupby("batch_size")
    out = pd.DataFrame({
        f"{prefix}_traces": g["trace"].agg(lambda t: ", ".join(sorted(set(t)))),
        f"{prefix}_steps": g.size(),
        f"{prefix}_step_profiled_us": g["step_profiled_us"].median(),
        f"{prefix}_step_us": g["step_us"].median(),
        f"{prefix}_busy_us": g["busy_us"].median(),
        f"{prefix}_idle_fraction": g["idle_us"].sum() / g["step_profiled_us"].sum(),
    })
    if prefix == "eager":
        out["predicted_graph_us"] = g["predicted_graph_us"].median()
    return out


def pair_by_batch_size(reports: Sequence[tuple[str, TraceReport]], model: PredictionModel) -> pd.DataFrame:
    """Eager vs graph by batch size (columns :data:`TABLE_COLUMNS`; NaN where a side is missing).

    ``predicted_speedup`` = eager step / predicted graph step; ``measured_speedup`` = eager
    step / graph-trace step. "mixed" traces count as graph traces (they replay graphs).
    """
    df = step_rows(reports, model)
    eager = _side(df[df["mode"] == "eager"], "eager")
    graph = _side(df[df["mode"] != "eager"], "graph")
    out = eager.join(graph, how="outer").reset_index()
    for col in TABLE_COLUMNS:
        if col not in out:
            out[col] = np.nan
    out["predicted_speedup"] = out["eager_step_us"] / out["predicted_graph_us"]
    out["measured_speedup"] = out["eager_step_us"] / out["graph_step_us"]
    return out[list(TABLE_COLUMNS)].sort_values("batch_size").reset_index(drop=True)


def crossover_batch_size(batch_sizes: np.ndarray, speedup: np.ndarray, threshold: float) -> float | None:
    """Batch size where the speedup first falls under ``1 + threshold``, interpolated in log2(batch size).

    ``None`` when it never falls under (within the sizes given); the smallest size when even
    that one is under.
    """
    ok = np.isfinite(speedup)
    bs, sp = np.asarray(batch_sizes, float)[ok], np.asarray(speedup, float)[ok]
    if bs.size == 0:
        return None
    order = np.argsort(bs)
    bs, sp = bs[order], sp[order]
    below = np.flatnonzero(sp < 1.0 + threshold)
    if below.size == 0:
        return None
    i = int(below[0])
    if i == 0:
        return float(bs[0])
    x0, x1 = np.log2(bs[i - 1]), np.log2(bs[i])
    y0, y1 = sp[i - 1], sp[i]
    x = x0 + (1.0 + threshold - y0) * (x1 - x0) / (y1 - y0)
    return float(round(2.0 ** x, 1))
