"""Every text and Markdown output of the analyzer: strings only, printed by the commands.

One module per output (trace report, tensor-parallel job, capture plan, fleet report, HTA
breakdowns, server logs) over one table helper (:mod:`launchgap.render.table`) with one Markdown escaping
rule. Nothing else in ``analyzer`` formats tables for people.
"""
from __future__ import annotations

from .fleet import render_fleet
from .hta import render_hta
from .job import render_job
from .plan import render_plan
from .serverlog import render_server_log
from .trace import render_trace

__all__ = ["render_fleet", "render_hta", "render_job", "render_plan", "render_server_log", "render_trace"]
