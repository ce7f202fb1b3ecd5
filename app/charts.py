"""Plotly figures for the dashboard. Inputs are analyzer results (or tables built from them).

Names from traces reach the charts only through :func:`launchgap.dashboard.text.hover_escape`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from launchgap.gaps import CAUSES
from launchgap.report import TraceReport
from launchgap.dashboard.text import hover_escape

#: Above this many events in one chart, draw with WebGL (Scattergl) instead of SVG.
WEBGL_MIN_EVENTS = 1500

CAUSE_COLORS = {
    "host": "#E45756",  # the CPU was late
    "launch": "#F58518",  # inside the late launch call
    "sync": "#B279A2",  # host blocked in a synchronizing call
    "gpu": "#9D755D",  # GPU-side wait
    "unattributed": "#BAB0AC",
    "peer": "#FF9DA6",  # collective waiting for other ranks
}
CAUSE_LABELS = {
    "host": "host (CPU late)",
    "launch": "launch call",
    "sync": "sync",
    "gpu": "GPU-side wait",
    "unattributed": "unattributed",
    "peer": "waiting for peers",
}
CATEGORY_COLORS = {
    "step range": "#C9D6E3",
    "launch call": "#54A24B",
    "graph launch": "#2E7D32",
    "sync call": "#B279A2",
    "kernel": "#4C78A8",
    "memcpy": "#72B7B2",
    "memset": "#72B7B2",
    "graph replay": "#1B4F8A",
    **{f"idle: {c}": col for c, col in CAUSE_COLORS.items()},
}
BUSY_COLOR = "#4C78A8"

# Legends go under the plot so they never collide with the title.
_LAYOUT = dict(template="plotly_white", margin=dict(l=10, r=10, t=40, b=10),
               legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))


def _segments(start: np.ndarray, end: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x and y for one line trace drawing each [start, end] as a segment at height y (NaN breaks the line)."""
    n = start.size
    x = np.full(3 * n, np.nan)
    yy = np.full(3 * n, np.nan)
    x[0::3], x[1::3] = start, end
    yy[0::3], yy[1::3] = y, y
    return x, yy


def timeline_figure(events: pd.DataFrame, lanes: Sequence[str], title: str, webgl: bool | None = None):
    """One step as lanes of bars: the CPU range and launch calls, GPU streams, idle gaps by cause.

    Each category is one SVG line trace (all its bars as thick segments of one path, cheap
    however many) plus one marker trace at the segment starts that carries the hover text
    and keeps sub-pixel events visible as ticks; with many events the markers are drawn with
    WebGL (Scattergl). Bars stay SVG: the plotly.js that Streamlit ships misdraws thick WebGL
    line segments (misplaced or hairline). Lanes are numeric rows labelled by tick text.
    """
    import plotly.graph_objects as go

    use_gl = len(events) > WEBGL_MIN_EVENTS if webgl is None else webgl
    scatter = go.Scattergl if use_gl else go.Scatter
    bar_px = 18
    # Top lane gets the highest y: a reversed axis misplaces WebGL lines in Streamlit's plotly.js.
    row_of = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}
    fig = go.Figure()
    for cat, color in CATEGORY_COLORS.items():  # one trace per category, not per event
        ev = events[events["category"] == cat]
        if ev.empty:
            continue
        start = ev["start_us"].to_numpy(float)
        end = ev["end_us"].to_numpy(float)
        row = ev["lane"].map(row_of).to_numpy(float)
        x, y = _segments(start, end, row)
        label = f"idle: {CAUSE_LABELS[cat[6:]]}" if cat.startswith("idle: ") else cat
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line=dict(color=color, width=bar_px), name=label,
                              legendgroup=cat, hoverinfo="skip", connectgaps=False))
        idle = cat.startswith("idle: ")
        what = "idle before" if idle else ""
        custom = np.stack([hover_escape(ev["name"].to_numpy()), ev["dur_us"].to_numpy(), start], axis=1)
        # Ticks keep sub-pixel kernels and calls visible; idle segments get none, so the idle
        # lane shows each cause at its true width (ticks there would let the last cause drawn win).
        fig.add_trace(scatter(
            x=start, y=row, mode="markers", legendgroup=cat, showlegend=False, name=label,
            marker=dict(color=color, symbol="line-ns-open", size=bar_px, line=dict(width=1, color=color),
                        opacity=0.0 if idle else 1.0),
            customdata=custom,
            hovertemplate=(f"{what} %{{customdata[0]}}<br>%{{customdata[1]:,.2f}} us, "
                           f"starts at %{{customdata[2]:,.1f}} us<extra>{label}</extra>"),
        ))
    layout = {**_LAYOUT, "legend": dict(orientation="h", yanchor="top", y=-0.12 - 0.4 / max(len(lanes), 1),
                                         xanchor="left", x=0)}
    fig.update_layout(**layout, title=dict(text=title, font=dict(size=14)),
                      height=170 + 34 * len(lanes), hovermode="closest")
    fig.update_yaxes(tickmode="array", tickvals=[row_of[lane] for lane in lanes],
                     ticktext=list(hover_escape(list(lanes), 40)), range=[-0.5, len(lanes) - 0.5], title=None,
                     showgrid=False, zeroline=False, fixedrange=True)
    fig.update_xaxes(title="time in step (us)", zeroline=False, showgrid=True)
    return fig


#: The zoomed timeline view ends after this many GPU ops of the step.
ZOOM_OPS = 40
_GPU_CATEGORIES = ("kernel", "memcpy", "memset", "graph replay")


def first_ops_end_us(events: pd.DataFrame, n: int) -> float | None:
    """End (us from the step's start) of the step's n-th GPU op; ``None`` when it has no more than n."""
    gpu_end = np.sort(events.loc[events["category"].isin(_GPU_CATEGORIES), "end_us"].to_numpy(float))
    return float(gpu_end[n - 1]) if gpu_end.size > n else None


def step_label(index: int, batch_size: int | None) -> str:
    return f"{index}" if batch_size is None else f"{index} (bs {batch_size})"


#: Per-step bars drawn at most; a trace with more steps shows runs of consecutive steps, each
#: bar the mean per step over its run (labelled by the run's first and last step).
MAX_STEP_BARS = 400


def step_runs(n_steps: int, max_bars: int = MAX_STEP_BARS) -> np.ndarray:
    """First step position of each bar: every step up to ``max_bars`` steps, else runs of ceil(n / max_bars)."""
    per = max(1, -(-n_steps // max_bars))
    return np.arange(0, n_steps, per)


def idle_by_cause_figure(report: TraceReport, max_bars: int = MAX_STEP_BARS):
    """Stacked bars per step: GPU busy, then idle time by cause (sums to the step's GPU window).

    More than ``max_bars`` steps: one bar per run of consecutive steps, the mean per step of the run.
    """
    import plotly.graph_objects as go

    steps = report.steps
    first = step_runs(len(steps), max_bars)
    count = np.diff(np.append(first, len(steps))) if len(steps) else np.array([], dtype=int)
    runs = bool(count.size) and int(count.max()) > 1

    def per_bar(values: list[float]) -> list[float]:
        v = np.asarray(values, dtype=float)
        return (np.add.reduceat(v, first) / count).tolist() if v.size else []

    if runs:
        last = first + count - 1
        x = [f"{steps[a].index}–{steps[b].index}" for a, b in zip(first.tolist(), last.tolist())]
    else:
        x = [step_label(s.index, s.batch_size) for s in steps]
    what = "steps" if runs else "step"
    per = " per step (mean)" if runs else ""
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=per_bar([s.gpu_busy_us for s in steps]), name="GPU busy", marker_color=BUSY_COLOR,
                         hovertemplate=f"{what} %{{x}}<br>busy %{{y:,.1f}} us{per}<extra></extra>"))
    for c in CAUSES:
        y = per_bar([s.idle_us_by_cause[c] for s in steps])
        if not any(v > 0 for v in y):
            continue
        fig.add_trace(go.Bar(x=x, y=y, name=f"idle: {CAUSE_LABELS[c]}", marker_color=CAUSE_COLORS[c],
                             hovertemplate=f"{what} %{{x}}<br>" + CAUSE_LABELS[c] + f" %{{y:,.1f}} us{per}<extra></extra>"))
    title = "GPU window per step" + (f" (mean over runs of {int(count.max())} steps)" if runs else "")
    fig.update_layout(**_LAYOUT, barmode="stack", height=340, title=dict(text=title, font=dict(size=14)))
    fig.update_xaxes(title=what, type="category")
    fig.update_yaxes(title="us")
    return fig


def _bin_labels(edges_us: Sequence[float]) -> list[str]:
    def fmt(v: float) -> str:
        return "∞" if v < 0 else (f"{v / 1000:g} ms" if v >= 1000 else f"{v:g}")

    return [f"{fmt(a)}–{fmt(b)}" + ("" if b < 0 or b >= 1000 else " us") for a, b in zip(edges_us[:-1], edges_us[1:])]


def gap_histogram_figure(report: TraceReport):
    """Gaps inside steps by duration: how many (bars) and how much idle time they add up to (line)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    h = report.gap_histogram
    labels = _bin_labels(h["edges_us"])
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=labels, y=h["count"], name="gaps", marker_color="#9BB7D4",
                         hovertemplate="%{x}: %{y:,.0f} gaps<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=labels, y=h["idle_us"], name="idle time", mode="lines+markers",
                             line=dict(color=CAUSE_COLORS["host"]),
                             hovertemplate="%{x}: %{y:,.1f} us idle in total<extra></extra>"), secondary_y=True)
    fig.update_layout(**_LAYOUT, height=340, title=dict(text="Gap durations (all steps)", font=dict(size=14)))
    fig.update_xaxes(title="gap duration", type="category")
    fig.update_yaxes(title_text="gaps", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text="idle time (us)", secondary_y=True, showgrid=False, rangemode="tozero")
    return fig


def share_tickformat(top: float) -> str:
    """A percent tick format for an axis of shares up to ``top`` with enough decimals that its ticks (about a fifth
    of ``top`` apart) read apart: ``.0%`` from 5% up, ``.1%`` from 0.5%, else ``.2%`` (a distribution over 128
    sizes, its largest share 1.9%, put ticks 0.5% apart that ``.0%`` printed as 2%, 2%, 1%, 1%, 0%)."""
    return ".0%" if top >= 0.05 else ".1%" if top >= 0.005 else ".2%"


def log_ticks(sizes: list[int], max_labels: int = 9) -> list[int]:
    """Batch sizes to label on a log axis so that no two labels overlap: the first, the last, and between them
    only sizes at least 1/``max_labels`` of the axis's log span past the previous label (and as far before
    the last). ``sizes`` ascending."""
    if len(sizes) <= 2:
        return list(sizes)
    span = math.log2(sizes[-1] / sizes[0]) if sizes[0] > 0 else 0.0
    gap = span / max_labels
    out = [sizes[0]]
    for b in sizes[1:-1]:  # distinct batch sizes (axis labels)
        if math.log2(b / out[-1]) >= gap and math.log2(sizes[-1] / b) >= gap:
            out.append(b)
    return out + [sizes[-1]]


def speedup_figure(table: pd.DataFrame, threshold: float, crossover: float | None):
    """CUDA-graph speedup by batch size (measured pairs and predicted from eager), crossover marked."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for col, label, color, dash in (("measured_speedup", "measured: eager / graph trace", "#4C78A8", "solid"),
                                    ("predicted_speedup", "predicted from the eager trace", "#F58518", "dot")):
        d = table.dropna(subset=[col])
        if d.empty:
            continue
        fig.add_trace(go.Scatter(x=d["batch_size"], y=d[col], name=label, mode="lines+markers",
                                 line=dict(color=color, dash=dash),
                                 hovertemplate="bs %{x}: %{y:.2f}x<extra>" + label + "</extra>"))
    fig.add_hline(y=1.0 + threshold, line=dict(color="#888", dash="dash"),
                  annotation_text=f"win threshold {threshold:.0%}", annotation_position="top left")
    if crossover is not None:
        fig.add_vline(x=crossover, line=dict(color=CAUSE_COLORS["host"], dash="dash"),
                      annotation_text=f"crossover ≈ bs {crossover:g}", annotation_position="top right")
    fig.update_layout(**_LAYOUT, height=360, title=dict(text="CUDA-graph speedup by batch size", font=dict(size=14)))
    ticks = log_ticks(sorted(set(int(b) for b in table["batch_size"])))
    fig.update_xaxes(title="batch size", type="log", tickmode="array", tickvals=ticks, ticktext=[str(b) for b in ticks])
    fig.update_yaxes(title="speedup (x)", rangemode="tozero")
    return fig


def step_time_figure(table: pd.DataFrame):
    """Grouped bars by batch size: eager and graph step times, busy time, and the predicted graph step."""
    import plotly.graph_objects as go

    fig = go.Figure()
    x = table["batch_size"].astype(str)
    series = (("eager_step_us", "eager step (unprofiled est.)", "#E45756"),
              ("eager_busy_us", "eager GPU busy", "#4C78A8"),
              ("predicted_graph_us", "predicted graph step", "#F58518"),
              ("graph_step_us", "graph step (trace)", "#54A24B"))
    for col, label, color in series:
        if col in table and table[col].notna().any():
            fig.add_trace(go.Bar(x=x, y=table[col], name=label, marker_color=color,
                                 hovertemplate="bs %{x}: %{y:,.1f} us<extra>" + label + "</extra>"))
    fig.update_layout(**_LAYOUT, barmode="group", height=360,
                      title=dict(text="Step time by batch size", font=dict(size=14)))
    # many sizes: slanted labels, one per bar, so they never overlap
    fig.update_xaxes(title="batch size", type="category", tickangle=-45 if len(x) > 12 else 0)
    fig.update_yaxes(title="us per step")
    return fig


def side_by_side_figure(reports: Sequence[tuple[str, TraceReport]]):
    """Mean step of each trace: GPU busy plus idle by cause (the bars sum to the mean GPU window)."""
    import plotly.graph_objects as go

    labels = list(hover_escape([name for name, _ in reports], 40))
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[_mean([s.gpu_busy_us for s in r.steps]) for _, r in reports],
                         name="GPU busy", marker_color=BUSY_COLOR))
    for c in CAUSES:
        y = [_mean([s.idle_us_by_cause[c] for s in r.steps]) for _, r in reports]
        if any(v > 0 for v in y):
            fig.add_trace(go.Bar(x=labels, y=y, name=f"idle: {CAUSE_LABELS[c]}", marker_color=CAUSE_COLORS[c]))
    fig.update_layout(**_LAYOUT, barmode="stack", height=340,
                      title=dict(text="Mean step: GPU busy and idle by cause", font=dict(size=14)))
    fig.update_xaxes(type="category")
    fig.update_yaxes(title="us per step")
    return fig


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def plan_comparison_figure(plan, labels: dict[str, str]):
    """Expected step time of the plan against each server's default list and all-eager."""
    import plotly.graph_objects as go

    names = ["this plan"] + [labels[k] for k in plan.baselines] + ["all eager"]
    values = ([plan.expected_step_us] + [b.score.expected_step_us for b in plan.baselines.values()]
              + [plan.all_eager_expected_step_us])
    graphs = [plan.score.n_graphs] + [b.score.n_graphs for b in plan.baselines.values()] + [0]
    colors = ["#54A24B"] + ["#9BB7D4"] * len(plan.baselines) + ["#E45756"]
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", marker_color=colors,
                           text=[f"{v:,.0f} us · {g} graphs" for v, g in zip(values, graphs)], textposition="auto",
                           hovertemplate="%{y}: %{x:,.1f} us per step<extra></extra>"))
    fig.update_layout(**_LAYOUT, height=300, title=dict(text="Expected decode step", font=dict(size=14)))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="us per step (expected over the distribution)", rangemode="tozero")
    return fig


def tradeoff_figure(plan):
    """Best expected step time for each number of graphs (the planner's trade-off curve)."""
    import plotly.graph_objects as go

    k = [t[0] for t in plan.tradeoff]
    v = [t[1] for t in plan.tradeoff]
    fig = go.Figure(go.Scatter(x=k, y=v, mode="lines+markers", line=dict(color="#4C78A8"),
                               hovertemplate="%{x} graphs: %{y:,.1f} us<extra></extra>"))
    fig.add_vline(x=plan.score.n_graphs, line=dict(color="#54A24B", dash="dash"),
                  annotation_text=f"plan: {plan.score.n_graphs}", annotation_position="top right")
    fig.update_layout(**_LAYOUT, height=300, title=dict(text="Graphs vs expected step", font=dict(size=14)))
    fig.update_xaxes(title="graphs captured")
    fig.update_yaxes(title="us per step", rangemode="tozero")
    return fig


def distribution_figure(plan):
    """Share of steps per batch size, coloured by what the plan runs them as."""
    import plotly.graph_objects as go

    rows = plan.per_batch
    fig = go.Figure()
    for graph, label, color in ((True, "replays a graph", "#54A24B"), (False, "runs eager", "#E45756")):
        sel = [r for r in rows if (r.bucket is not None) == graph]
        if not sel:
            continue
        fig.add_trace(go.Bar(x=[str(r.batch_size) for r in sel], y=[r.weight for r in sel], name=label,
                             marker_color=color,
                             customdata=[[r.bucket if r.bucket is not None else "eager", r.planned_us] for r in sel],
                             hovertemplate="bs %{x}: %{y:.1%} of steps → %{customdata[0]} "
                                           "(%{customdata[1]:,.1f} us)<extra></extra>"))
    fig.update_layout(**_LAYOUT, height=300, title=dict(text="Batch-size distribution", font=dict(size=14)))
    fig.update_xaxes(title="batch size", type="category",
                     categoryorder="array", categoryarray=[str(r.batch_size) for r in rows])
    fig.update_yaxes(title="share of steps", tickformat=share_tickformat(max((r.weight for r in rows), default=1.0)))
    return fig


def rank_split_figure(ranks):
    """Each rank's median step split into GPU busy, idle for its own host, waiting for peers, and the rest.

    ``ranks`` are :class:`launchgap.ranks.RankSummary` rows; the idle parts are the rank's idle
    fractions times its median step, the rest (GPU-side waits, unattributed idle) closes the step.
    """
    import plotly.graph_objects as go

    y = [f"rank {r.rank}" for r in ranks]
    step = np.array([r.step_us_median for r in ranks], dtype=float)
    busy = np.array([r.gpu_busy_us_median for r in ranks], dtype=float)
    host = step * np.array([r.host_idle_fraction for r in ranks], dtype=float)
    peer = step * np.array([r.peer_idle_fraction for r in ranks], dtype=float)
    rest = np.maximum(step - busy - host - peer, 0.0)
    fig = go.Figure()
    for name, vals, color in (("GPU busy", busy, BUSY_COLOR), ("idle: own host", host, CAUSE_COLORS["host"]),
                              ("waiting for peers", peer, CAUSE_COLORS["peer"]),
                              ("other idle", rest, CAUSE_COLORS["unattributed"])):
        fig.add_trace(go.Bar(x=vals, y=y, orientation="h", name=name, marker_color=color,
                             hovertemplate="%{y}: " + name + " %{x:,.0f} us<extra></extra>"))
    fig.update_layout(**_LAYOUT, barmode="stack", height=200 + 40 * len(ranks),
                      title=dict(text="Median step per rank", font=dict(size=14)))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.45, xanchor="left", x=0, traceorder="normal"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title="us per step (profiled)", rangemode="tozero")
    return fig


def fleet_idle_figure(idle_fraction_by_cause: dict[str, float]):
    """The fleet's idle time by cause, as a share of all step windows."""
    import plotly.graph_objects as go

    causes = [c for c in idle_fraction_by_cause if idle_fraction_by_cause[c] > 0] or list(idle_fraction_by_cause)
    fig = go.Figure(go.Bar(x=[CAUSE_LABELS.get(c, c) for c in causes], y=[idle_fraction_by_cause[c] for c in causes],
                           marker_color=[CAUSE_COLORS.get(c, "#BAB0AC") for c in causes],
                           hovertemplate="%{x}: %{y:.1%} of step time<extra></extra>"))
    fig.update_layout(**_LAYOUT, height=300, title=dict(text="Fleet idle by cause", font=dict(size=14)))
    fig.update_yaxes(title="share of step windows", rangemode="tozero",
                     tickformat=share_tickformat(max((idle_fraction_by_cause[c] for c in causes), default=1.0)))
    return fig


def batch_histogram_figure(histogram: dict[int, int]):
    """Steps per batch size over the fleet."""
    import plotly.graph_objects as go

    sizes = sorted(histogram)
    fig = go.Figure(go.Bar(x=[str(b) for b in sizes], y=[histogram[b] for b in sizes], marker_color=BUSY_COLOR,
                           hovertemplate="bs %{x}: %{y:,} steps<extra></extra>"))
    fig.update_layout(**_LAYOUT, height=300, title=dict(text="Batch sizes over the fleet", font=dict(size=14)))
    fig.update_xaxes(title="batch size", type="category")
    fig.update_yaxes(title="steps")
    return fig


def pareto_figure(plan, labels: dict[str, str]):
    """The plan's trade-off: expected step against graph memory, one point per Pareto-optimal
    bucket set (colour: capture seconds when known), the plan and the servers' lists marked
    (``labels``: display name per engine)."""
    import plotly.graph_objects as go

    pts = plan.pareto
    caps = [p.capture_s for p in pts]
    known = all(c is not None for c in caps)
    text = [f"{p.graphs} graphs: {', '.join(str(b) for b in p.buckets[:12])}{' …' if len(p.buckets) > 12 else ''}"
            for p in pts]
    fig = go.Figure(go.Scatter(
        x=[p.memory_mib for p in pts], y=[p.expected_step_us for p in pts], mode="lines+markers", name="Pareto",
        line=dict(color="#BAB0AC", shape="hv"),
        # the scale from 0 s: one plan of no graph (every capture 0 s) would centre it on 0, with negative seconds
        marker=dict(size=9, color=caps if known else BUSY_COLOR, colorscale="Viridis", showscale=known,
                    cmin=0.0 if known else None, cmax=max(max(caps), 0.1) if known else None,
                    colorbar=dict(title="capture s") if known else None,
                    symbol=["circle" if p.within_budget else "circle-open" for p in pts]),
        customdata=[[t, c if c is not None else float("nan")] for t, c in zip(text, caps)],
        hovertemplate="%{customdata[0]}<br>%{x:,.0f} MiB · %{y:,.1f} us · %{customdata[1]:.1f} s<extra></extra>"))
    fig.add_trace(go.Scatter(x=[plan.memory_used_mib], y=[plan.expected_step_us], mode="markers", name="this plan",
                             marker=dict(size=16, color="#54A24B", symbol="star"),
                             hovertemplate="this plan: %{x:,.0f} MiB · %{y:,.1f} us<extra></extra>"))
    base = sorted(plan.baselines.values(), key=lambda b: b.memory_mib)
    if base:
        # labels above and below in turn along the memory axis: two lists of about the same memory (vLLM's 51 graphs
        # and a current list of 52) would print one label over the other
        fig.add_trace(go.Scatter(x=[b.memory_mib for b in base], y=[b.score.expected_step_us for b in base],
                                 mode="markers+text", name="server defaults",
                                 text=[labels.get(b.name, b.name) for b in base],
                                 textposition=["top center" if i % 2 == 0 else "bottom center"
                                               for i in range(len(base))],
                                 marker=dict(size=11, color="#4C78A8", symbol="diamond"),
                                 hovertemplate="%{text}: %{x:,.0f} MiB · %{y:,.1f} us<extra></extra>"))
    if plan.options.memory_budget_mib is not None:
        fig.add_vline(x=plan.options.memory_budget_mib, line=dict(color="#E45756", dash="dash"),
                      annotation_text="memory budget", annotation_position="top right")
    fig.update_layout(**_LAYOUT, height=360, title=dict(text="Graph memory vs expected step", font=dict(size=14)))
    # a margin left of 0 MiB: a plan of no graph sits at 0, and its marker would be cut in half at the axis
    xs = [p.memory_mib for p in pts] + [plan.memory_used_mib] + [b.memory_mib for b in base]
    top = max([x for x in xs if x is not None and math.isfinite(x)] + [1.0])
    fig.update_xaxes(title="graph memory (MiB, predicted)", range=[-0.03 * top, 1.05 * top])
    fig.update_yaxes(title="us per step (expected)", rangemode="tozero")
    return fig


#: Colours of the graph-mode classes of a step in the coverage strip.
COVERAGE_COLORS = {"full": "#2E7D32", "piecewise": "#8BC34A", "eager": "#9E9E9E", "fallback": "#D32F2F"}


def step_class(step) -> str:
    """``fallback`` for an eager fallback, else the step's graph coverage."""
    return "fallback" if step.fallback else step.graph_coverage


def coverage_strip_figure(report: TraceReport):
    """One bar per step in trace order, as tall as its GPU window, coloured full / piecewise / eager / fallback."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for cls, color in COVERAGE_COLORS.items():
        sel = [s for s in report.steps if step_class(s) == cls]
        if not sel:
            continue
        fig.add_trace(go.Bar(
            x=[s.index for s in sel], y=[s.dur_us for s in sel], width=[0.85] * len(sel), name=cls,
            marker_color=color,
            customdata=[[s.batch_size if s.batch_size is not None else "-", s.bucket if s.bucket is not None else "-"]
                        for s in sel],
            hovertemplate="step %{x}<br>bs %{customdata[0]}, bucket %{customdata[1]}<br>%{y:,.0f} us<extra>"
                          + cls + "</extra>"))
    fig.update_layout(**_LAYOUT, barmode="overlay", bargap=0.05, height=260,
                      title=dict(text="Graph coverage per step (bar = GPU window)", font=dict(size=14)))
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="us")
    return fig


def host_phases_figure(phases_us: dict[str, float], top: int = 8):
    """Horizontal bars: host phases between steps, us per step (largest first)."""
    import plotly.graph_objects as go

    items = list(phases_us.items())[:top][::-1]
    names = hover_escape([k for k, _ in items], 60)
    fig = go.Figure(go.Bar(x=[v for _, v in items], y=names, orientation="h", marker_color=CAUSE_COLORS["host"],
                           hovertemplate="%{y}<br>%{x:,.2f} us per step<extra></extra>"))
    fig.update_layout(**_LAYOUT, height=60 + 28 * max(len(items), 1),
                      title=dict(text="Host work between steps (us per step)", font=dict(size=14)))
    return fig
