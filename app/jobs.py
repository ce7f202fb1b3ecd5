"""Tensor-parallel jobs among a session's loaded traces, and their joint analysis (cached).

A job is two or more loaded traces of one run's ranks. They are found the way
``launchgap analyze DIR`` finds them (:func:`launchgap.ranks.group_traces`): by the original
file names (``..._rank0...`` / ``..._rank1...`` with the rest equal), else by Kineto
``distributedInfo`` (same folder, same world size, different ranks). The cached parsed
traces carry their content hash as their path, so grouping and the job's messages use the
names the user loaded them under instead. One loaded file that holds several ranks (an nsys export
of a tensor-parallel server: :mod:`launchgap.rank_split`) is a job of its own, split per rank.
"""
from __future__ import annotations

import dataclasses

from launchgap.rank_split import find_ranks, split_ranks
from launchgap.ranks import JobReport, analyze_job, group_traces
from launchgap.report import AnalysisOptions
from launchgap.dashboard.cache import BoundedCache
from launchgap.dashboard.session import LoadedTrace


def find_jobs(entries: list[LoadedTrace]) -> list[list[LoadedTrace]]:
    """Groups of two or more loaded traces that are ranks of one job, each sorted by rank, then each loaded file
    that holds several ranks (a group of one)."""
    ok = [e for e in entries if e.ok and e.trace is not None]
    named = [dataclasses.replace(e.trace, path=e.name) for e in ok]
    by_id = {id(t): e for t, e in zip(named, ok)}
    groups = [[by_id[id(t)] for t in g] for g in group_traces(named) if len(g) >= 2]
    return groups + [[e] for e in ok if len(find_ranks(e.trace)) >= 2]


def job_label(group: list[LoadedTrace]) -> str:
    """A short name for a job: its first file's name with the rank replaced by ``rank*``."""
    from launchgap.ranks import job_key

    first = group[0].name
    if len(group) == 1:
        return f"{first} (ranks of one file)"
    return f"{job_key(first) or first} ({len(group)} traces)"


def analyze_job_cached(group: list[LoadedTrace], options: AnalysisOptions, cache: BoundedCache) -> JobReport:
    """:func:`launchgap.ranks.analyze_job` over the group's parsed traces (through the cache).

    Keyed by the traces' content hashes, the names they were loaded under (ranks and the
    job's key can come from names) and the options; raises the analyzer's errors uncached.
    """
    key = ("job", tuple(e.digest for e in group), tuple(e.name for e in group), options)

    def compute() -> JobReport:
        traces = [dataclasses.replace(e.trace, path=e.name) for e in group]
        split = split_ranks(traces[0]) if len(traces) == 1 else None
        if split is not None:  # one file of several ranks
            return analyze_job(list(split.traces), options, split=split.note)
        return analyze_job(traces, options)

    return cache.get_or_compute(key, compute)
