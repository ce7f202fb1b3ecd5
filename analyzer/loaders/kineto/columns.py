"""Decoded events, piece by piece in file order, into the loader's columns (:class:`_ColumnBuilder`).

Each piece's columns are kept at the narrowest integer types their values allow until :meth:`finish`
folds them, one column at a time, into the :class:`~launchgap.trace.Trace` (pieces let go as they
are folded in). The C scan's records (:meth:`~_ColumnBuilder.add_scanned`) and msgspec's Structs
(:meth:`~_ColumnBuilder.add`) give the same state, field for field.
"""

from __future__ import annotations

import gc
from array import array
from itertools import repeat
from typing import Any, Iterable

import numpy as np

from ...errors import NoGpuActivityError
from .._io import (HEAP)
from ...trace import LAUNCH_CONFIG_COLUMNS, Kind, Trace, build_trace
from .arrays import _first_appearance, _int_column, _intern_local, _narrowest_int
from .python_calls import _PythonCallColumns
from .scan import _SCAN_EVENT
from .schema import SETTINGS_SAMPLE_EVENTS, _Args, _CAT_KIND, _Device, _DistInfo, _FLOW_CODE, _Flag, _NO_STACK, _PYTHON_CAT, _PYTHON_CODE, _SAMPLE_CODES, _X_CODES, _as_int, _as_us, _device_properties, _dim3, _rank_of, _resource, _settings_of


def _launch_config(args: list, n: int) -> list[np.ndarray]:
    """Columns grid x, y, z, block x, y, z (int32) of each event's args, -1 where absent."""
    out = np.full((6, n), -1, dtype=np.int32)
    grids = [a.grid for a in args]
    blocks = [a.block for a in args]
    for col, values in ((0, grids), (3, blocks)):
        at = [i for i, v in enumerate(values) if v is not None]  # kernels only
        if at:
            out[col:col + 3, at] = np.array([_dim3(values[i]) for i in at], dtype=np.int32).T
    return list(out)


# One kept event's numeric fields under the strict schema (see _ColumnBuilder._add_kept_strict).
_KEPT_RECORD = np.dtype([("ts", np.float64), ("dur", np.float64), ("corr", np.int64),
                         ("device", np.int64), ("stream", np.int64), ("graph_id", np.int64)])


class _HostIds:
    """pid/tid values as int64: ints as they are, anything else interned to ids -2, -3, ...

    Ids follow first appearance over all kept pids, then all kept tids, then flows (the
    order of a single pass over the columns), so they do not depend on how the file was cut.
    """

    def __init__(self) -> None:
        self.pending: dict[str, list[tuple[np.ndarray, np.ndarray, list[str]]]] = {"pid": [], "tid": [], "flow": []}

    def column(self, values: list, n: int, group: str) -> np.ndarray:
        try:  # the usual case: all ints (msgspec gives no bools for these fields)
            return np.frombuffer(array("q", values), dtype=np.int64)
        except (TypeError, OverflowError):
            pass
        out = np.empty(n, dtype=np.int64)
        rows: list[int] = []
        keys: list[str] = []
        for i, v in enumerate(values):  # only files with non-integer pids/tids come here
            if isinstance(v, int) and not isinstance(v, bool):
                out[i] = v if -(2**63) <= v < 2**63 else -1
            else:
                out[i] = -1
                rows.append(i)
                keys.append(str(v))
        if rows:
            self.pending[group].append((out, np.array(rows, dtype=np.int64), keys))
        return out

    def resolve(self) -> None:
        """Fill the interned ids in, in first-appearance order (see the class docstring)."""
        ids: dict[str, int] = {}
        for group in ("pid", "tid", "flow"):
            for out, rows, keys in self.pending[group]:
                out[rows] = [ids.setdefault(k, -2 - len(ids)) for k in keys]


class _ColumnBuilder:
    """Turns decoded events, piece by piece in file order, into the loader's columns.

    Names are interned in first-appearance order, all event names before any Input Dims
    text (they share one table), whatever the pieces were.
    """

    def __init__(self, strict: bool, sample_limit: int = SETTINGS_SAMPLE_EVENTS) -> None:
        self.strict = strict
        self.names: dict[str, int] = {}
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in (
            "kind", "name_id", "ts_us", "dur_us", "pid", "tid", "corr", "device_arg", "stream_arg", "graph_id",
            "kernel_name_id", *LAUNCH_CONFIG_COLUMNS)}
        self.dims: list[tuple[np.ndarray, np.ndarray, list[str]]] = []  # (rows, local ids, local texts)
        self.kernel_texts: list[str] = []  # kernel args in first appearance, one entry per piece and text
        self.flows: dict[str, list[np.ndarray]] = {"pid": [], "tid": [], "ts_us": [], "id": []}
        self.host = _HostIds()
        self.n_kept = 0
        self.n_events = 0
        self.mtia_events = False  # MTIA device/runtime categories seen: say so when there is no GPU work
        self.python = _PythonCallColumns(strict)
        self.gpu_seen = False
        self.sample_limit = sample_limit
        self.sampled = 0
        self.sample_codes: list[np.ndarray] = []  # per sampled event: a code of _SAMPLE_CODES (4: cpu_op with a stack)
        # per kernel name: the largest "registers per thread" and "shared memory" of its events (-1 none says)
        self.resources: dict[str, tuple[int, int]] = {}

    def add(self, events: list) -> None:
        self.n_events += len(events)
        # List comprehensions, not map/attrgetter: CPython 3.11 specialises attribute
        # loads on Structs, which makes them the fastest way to read one field of each.
        kinds = None
        if self.strict:  # one pass gives every event a code; the three lists are picked by it
            codes = np.fromiter([_X_CODES.get(e.cat, 0) if e.ph == "X" else _FLOW_CODE if e.ph == "f" and
                                 e.cat == "ac2g" else 0 for e in events], dtype=np.int8, count=len(events))
            rows = np.flatnonzero((codes > 0) & (codes < _PYTHON_CODE))
            kinds = codes[rows] - 1
            kept = list(map(events.__getitem__, rows.tolist()))
            flows = list(map(events.__getitem__, np.flatnonzero(codes == _FLOW_CODE).tolist()))
            python = list(map(events.__getitem__, np.flatnonzero(codes == _PYTHON_CODE).tolist()))
        else:
            kept = [e for e in events if e.ph == "X" and isinstance(e.cat, str) and e.cat in _CAT_KIND]
            flows = [e for e in events if e.cat == "ac2g" and e.ph == "f"]
            python = [e for e in events if e.cat == _PYTHON_CAT and e.ph == "X"]
        if flows:
            self._add_flows(flows)
        if python:
            self.python.add(python)
        if kept:
            self._add_kept(kept, kinds)
            self._narrow_last()
            self.gpu_seen = self.gpu_seen or bool((self.parts["kind"][-1] <= Kind.GRAPH).any())
        if not self.gpu_seen and not self.mtia_events:  # only traces without GPU work pay for this scan
            self.mtia_events = any(isinstance(e.cat, str) and e.cat.startswith("mtia") for e in events)
        if self.sampled < self.sample_limit:  # the profiler's settings show in any stretch of events
            self._sample_settings(events[: self.sample_limit - self.sampled])

    def add_scanned(self, records: bytes, strings: list[str], raws: list[bytes], resources: bytes) -> int | None:
        """The C scan's result for one text (see :func:`_add_text`), added exactly as :meth:`add` adds the
        same events decoded by msgspec. Returns how many events were added, or None, having added
        nothing, for a text left to msgspec (a flow whose id is not an integer: rare enough)."""
        ev = np.frombuffer(records, dtype=_SCAN_EVENT)
        n = ev.size
        table = [*strings, "None", ""]  # what a missing name, and a missing ph/cat/kernel, read as
        none_at, empty_at = len(strings), len(strings) + 1
        text = {field: np.where(ev[field] < 0, absent, ev[field])  # indices into table, missing ones included
                for field, absent in (("ph", empty_at), ("cat", empty_at), ("name", none_at), ("kernel", empty_at))}
        ph, cat = text["ph"], text["cat"]
        x_code = np.array([_X_CODES.get(t, 0) for t in table], dtype=np.int8)
        is_x = np.array([t == "X" for t in table])
        is_f = np.array([t == "f" for t in table])
        is_ac2g = np.array([t == "ac2g" for t in table])
        codes = np.where(is_x[ph], x_code[cat], np.where(is_f[ph] & is_ac2g[cat], _FLOW_CODE, 0)).astype(np.int8)
        flows = np.flatnonzero(codes == _FLOW_CODE)
        if flows.size and (ev["id_kind"][flows] == 2).any():
            return None
        self.n_events += n
        if flows.size:
            self.flows["pid"].append(self._scanned_host(ev, flows, "pid", table, "flow"))
            self.flows["tid"].append(self._scanned_host(ev, flows, "tid", table, "flow"))
            self.flows["ts_us"].append(ev["ts"][flows])
            self.flows["id"].append(np.where(ev["id_kind"][flows] == 1, ev["id"][flows], -1))
        python = np.flatnonzero(codes == _PYTHON_CODE)
        if python.size:
            self.python.add_scanned(text["name"][python], ev["ts"][python], ev["dur"][python], ev["tid"][python],
                                    ev["tid_str"][python], table, none_at)
        rows = np.flatnonzero((codes > 0) & (codes < _PYTHON_CODE))
        if resources:  # (string index, registers, shared memory) per kernel name; -1: a kernel without a name
            res = np.frombuffer(resources, dtype=np.int32).reshape(-1, 3).tolist()
            self._add_resources((table[i] if i >= 0 else table[none_at], r, m) for i, r, m in res)
        if rows.size:
            self._add_kept_scanned(ev, rows, codes[rows] - 1, text["name"][rows], text["kernel"][rows], table, raws)
            self._narrow_last()
            self.gpu_seen = self.gpu_seen or bool((self.parts["kind"][-1] <= Kind.GRAPH).any())
        if not self.gpu_seen and not self.mtia_events:
            self.mtia_events = any(table[i].startswith("mtia") for i in np.unique(cat).tolist())
        if self.sampled < self.sample_limit:
            m = min(n, self.sample_limit - self.sampled)
            sample = np.array([_SAMPLE_CODES.get(t, 0) for t in table], dtype=np.int8)[cat[:m]]
            sample[(sample == 3) & (ev["has_stack"][:m] != 0)] = 4
            self.sampled += m
            self.sample_codes.append(sample)
        return n

    #: Integer columns kept at the narrowest type their values fit while the pieces wait to be
    #: concatenated (which widens them back to the widest piece's type): most are -1 or small.
    _NARROWED = ("corr", "device_arg", "stream_arg", "graph_id", "pid", "tid", *LAUNCH_CONFIG_COLUMNS)

    def _narrow_last(self) -> None:
        """Narrow the pieces just added (a pid/tid piece that waits for its texts' ids is left alone)."""
        waiting = {id(out) for group in ("pid", "tid") for out, _, _ in self.host.pending[group]}
        for key in self._NARROWED:
            parts = self.parts[key]
            if parts and id(parts[-1]) not in waiting:
                parts[-1] = _narrowest_int(parts[-1])

    def _add_resources(self, triples: Iterable[tuple[str, int, int]]) -> None:
        """Fold ``(kernel name, registers per thread, shared memory bytes)`` (ints, -1 unknown) into
        :attr:`resources`: the largest of each per name, whatever the order the pieces come in."""
        res = self.resources
        for name, regs, smem in triples:  # distinct kernel names (and values), not events
            if regs < 0 and smem < 0:
                continue
            old = res.get(name)
            if old is None:
                res[name] = (regs, smem)
            elif regs > old[0] or smem > old[1]:  # a new tuple only when it grows: none per piece otherwise
                res[name] = (max(old[0], regs), max(old[1], smem))

    def _kernel_resources(self, kept: list, kinds: np.ndarray) -> None:
        """The resources of the kernels among the kept events (``kinds``: their kinds), each distinct (name,
        registers, shared memory) once; names as :meth:`_add_kept` reads them."""
        kern = np.flatnonzero(kinds == Kind.KERNEL).tolist()
        if not kern:
            return
        events = list(map(kept.__getitem__, kern))
        names = [e.name if isinstance(e.name, str) else str(e.name) for e in events]
        no_args = _Args()
        args = [e.args or no_args for e in events]
        del events
        try:
            seen = set(zip(names, [a.registers for a in args], [a.shared_memory for a in args]))
        except TypeError:  # an unhashable value (a list where an int belongs): each converted first
            seen = {(n, _resource(a.registers), _resource(a.shared_memory)) for n, a in zip(names, args)}
        self._add_resources((n, _resource(r), _resource(m)) for n, r, m in seen)

    def _scanned_host(self, ev: np.ndarray, rows: np.ndarray, field: str, table: list[str], group: str) -> np.ndarray:
        """pid or tid of the scanned events at ``rows``, as :meth:`_HostIds.column` makes them."""
        values = ev[field][rows]
        texts = ev[field + "_str"][rows]
        if (texts == -1).all():  # the usual case: all ints
            return values
        listed = [v if t == -1 else "None" if t == -2 else table[t] for v, t in zip(values.tolist(), texts.tolist())]
        return self.host.column(listed, rows.size, group)

    def _add_kept_scanned(self, ev: np.ndarray, rows: np.ndarray, kinds: np.ndarray, name: np.ndarray,
                          kernel: np.ndarray, table: list[str], raws: list[bytes]) -> None:
        """:meth:`_add_kept_strict` for the scanned events at ``rows`` (``name``, ``kernel``: their indices
        into ``table``)."""
        p = self.parts
        n = rows.size
        self.n_kept += n
        p["kind"].append(kinds)
        for key, field in (("ts_us", "ts"), ("dur_us", "dur"), ("corr", "corr"), ("device_arg", "device"),
                           ("stream_arg", "stream"), ("graph_id", "graph_id")):
            p[key].append(ev[field][rows])
        for field in LAUNCH_CONFIG_COLUMNS:
            p[field].append(ev[field][rows])
        p["pid"].append(self._scanned_host(ev, rows, "pid", table, "pid"))
        p["tid"].append(self._scanned_host(ev, rows, "tid", table, "tid"))
        p["name_id"].append(_intern_local(name, table, self.names))
        named = np.array([t != "" for t in table])[kernel]  # "" reads as no kernel named, as in add()
        if not named.any():
            p["kernel_name_id"].append(np.full(n, -1, dtype=np.int32))
        else:
            uniq = _first_appearance(kernel[named])
            local = np.full(len(table), -1, dtype=np.int32)
            local[uniq] = np.arange(len(self.kernel_texts), len(self.kernel_texts) + uniq.size, dtype=np.int32)
            self.kernel_texts.extend(table[i] for i in uniq.tolist())
            p["kernel_name_id"].append(local[kernel])
        dims = ev["dims"][rows]
        at = np.flatnonzero(dims >= 0)
        if at.size:  # as _add_dims: texts keyed by their decoded text, in first appearance
            by_text: dict[str, int] = {}
            uniq = _first_appearance(dims[at])
            local = np.zeros(len(raws), dtype=np.int32)
            local[uniq] = [by_text.setdefault(raws[i].decode("utf-8", "replace"), len(by_text)) for i in uniq.tolist()]
            self.dims.append((self.n_kept - n + at, local[dims[at]], list(by_text)))

    def _sample_settings(self, sample: list) -> None:
        """A code per event, over the first events of the file, of what only some profiler settings record."""
        n = len(sample)
        self.sampled += n
        cats = [e.cat for e in sample] if self.strict else [e.cat if isinstance(e.cat, str) else "" for e in sample]
        codes = np.fromiter(map(_SAMPLE_CODES.get, cats, repeat(0)), dtype=np.int8, count=n)
        ops = np.flatnonzero(codes == 3)
        if ops.size:
            stack = np.fromiter([e.args is not None and bytes(e.args.call_stack) not in _NO_STACK
                                 for e in map(sample.__getitem__, ops.tolist())], dtype=bool, count=ops.size)
            codes[ops[stack]] = 4
        self.sample_codes.append(codes)

    def settings_sample(self) -> tuple[dict[str, int], int]:
        """Counts over the sampled events (see :func:`_settings_of`), and how many were sampled."""
        codes = np.concatenate(self.sample_codes) if self.sample_codes else np.zeros(0, dtype=np.int8)
        codes = codes[:SETTINGS_SAMPLE_EVENTS]
        counts = np.bincount(codes, minlength=5)
        return ({"python_function": int(counts[1]), "cpu_instant_event": int(counts[2]),
                 "cpu_op": int(counts[3] + counts[4]), "call_stack": int(counts[4])}, int(codes.size))

    def merge(self, other: _ColumnBuilder) -> None:
        """Append ``other``'s columns, as if its events had been added here after this builder's.

        Its name ids are remapped onto this table (first appearance order is kept: its own table
        is in first-appearance order); its Input Dims rows shift by the rows kept here; its
        pid/tid texts, sampled events and Python calls follow this builder's.
        """
        remap = np.fromiter((self.names.setdefault(s, len(self.names)) for s in other.names), dtype=np.int32,
                            count=len(other.names))
        for key, arrays in other.parts.items():
            if key == "name_id":
                arrays = [remap[a] for a in arrays]
            elif key == "kernel_name_id":  # local ids index kernel_texts: shift past this builder's
                arrays = [np.where(a >= 0, a + len(self.kernel_texts), -1).astype(np.int32) for a in arrays]
            self.parts[key].extend(arrays)
        self.kernel_texts.extend(other.kernel_texts)
        self._add_resources((n, r, m) for n, (r, m) in other.resources.items())
        self.dims.extend((rows + self.n_kept, local, texts) for rows, local, texts in other.dims)
        for key, arrays in other.flows.items():
            self.flows[key].extend(arrays)
        for group, pending in other.host.pending.items():
            self.host.pending[group].extend(pending)
        self.mtia_events = self.mtia_events or (not self.gpu_seen and other.mtia_events)
        self.gpu_seen = self.gpu_seen or other.gpu_seen
        self.n_kept += other.n_kept
        self.n_events += other.n_events
        wanted = SETTINGS_SAMPLE_EVENTS - self.sampled
        if wanted > 0 and other.sample_codes:
            codes = np.concatenate(other.sample_codes)[:wanted]
            self.sample_codes.append(codes)
            self.sampled += codes.size
        self.python.merge(other.python)

    def _add_kept(self, kept: list, kinds: np.ndarray | None) -> None:
        n = len(kept)
        self.n_kept += n
        if kinds is not None:
            self._add_kept_strict(kept, kinds)
            return
        p = self.parts  # the lenient schema: any JSON scalar, converted value by value
        p["kind"].append(np.fromiter([_CAT_KIND[e.cat] for e in kept], dtype=np.int8, count=n))
        names = [e.name if isinstance(e.name, str) else str(e.name) for e in kept]
        p["ts_us"].append(np.fromiter([_as_us(e.ts) for e in kept], dtype=np.float64, count=n))
        p["dur_us"].append(np.fromiter([_as_us(e.dur) if e.dur is not None else 0.0 for e in kept],
                                       dtype=np.float64, count=n))
        no_args = _Args()
        args = [e.args or no_args for e in kept]
        p["corr"].append(np.fromiter([_as_int(a.correlation) for a in args], dtype=np.int64, count=n))
        p["device_arg"].append(np.fromiter([_as_int(a.device) for a in args], dtype=np.int64, count=n))
        p["stream_arg"].append(np.fromiter([_as_int(a.stream) for a in args], dtype=np.int64, count=n))
        p["graph_id"].append(np.fromiter([_as_int(a.graph_id) for a in args], dtype=np.int64, count=n))
        p["pid"].append(self.host.column([e.pid for e in kept], n, "pid"))
        p["tid"].append(self.host.column([e.tid for e in kept], n, "tid"))
        p["name_id"].append(self._intern_names(names))
        p["kernel_name_id"].append(self._launch_kernel_names([a.kernel for a in args], n))
        for key, column in zip(LAUNCH_CONFIG_COLUMNS, _launch_config(args, n)):
            p[key].append(column)
        self._kernel_resources(kept, p["kind"][-1])
        self._add_dims([bytes(a.input_dims) if a.input_dims else b"" for a in args])

    def _add_kept_strict(self, kept: list, kinds: np.ndarray) -> None:
        """The strict schema's events: every numeric field in one pass over the events, into one record
        per event (the values are already ints and floats: msgspec checked them). Each pass over a
        million Structs costs tens of milliseconds, most of it reaching the objects, so passes are few."""
        p = self.parts
        n = len(kept)
        collecting = gc.isenabled()
        gc.disable()  # a tuple per event: the collector would run every 700 of them and find nothing
        try:
            rec = np.fromiter([(e.ts, e.dur, a.correlation, a.device, a.stream, a.graph_id)
                               for e in kept for a in (e.args,)], dtype=_KEPT_RECORD, count=n)
        except OverflowError:  # an id past int64: those columns value by value (it reads as -1)
            args = [e.args for e in kept]
            rec = np.empty(n, dtype=_KEPT_RECORD)
            rec["ts"] = [e.ts for e in kept]
            rec["dur"] = [e.dur for e in kept]
            for field, attr in (("corr", "correlation"), ("device", "device"), ("stream", "stream"),
                                ("graph_id", "graph_id")):
                rec[field] = _int_column([getattr(a, attr) for a in args], n)
        finally:
            if collecting:
                gc.enable()
        p["kind"].append(kinds)
        p["ts_us"].append(rec["ts"].copy())
        p["dur_us"].append(rec["dur"].copy())
        p["corr"].append(rec["corr"].copy())
        p["device_arg"].append(rec["device"].copy())
        p["stream_arg"].append(rec["stream"].copy())
        p["graph_id"].append(rec["graph_id"].copy())
        del rec
        p["pid"].append(self.host.column([e.pid for e in kept], n, "pid"))
        p["tid"].append(self.host.column([e.tid for e in kept], n, "tid"))
        p["name_id"].append(self._intern_names([e.name for e in kept]))
        p["kernel_name_id"].append(self._launch_kernel_names([e.args.kernel for e in kept], n))
        for key, column in zip(LAUNCH_CONFIG_COLUMNS, _launch_config([e.args for e in kept], n)):
            p[key].append(column)
        self._kernel_resources(kept, kinds)
        dims = [e.args.input_dims for e in kept]
        self._add_dims(list(map(bytes, dims)) if any(dims) else [])  # bytes of an empty Raw: b""

    def _intern_names(self, names: list[str]) -> np.ndarray:
        local = dict.fromkeys(names)  # unique names, first appearance first
        table = self.names
        for s in local:  # a loop over unique names, not events
            local[s] = table.setdefault(s, len(table))
        return np.fromiter(map(local.__getitem__, names), dtype=np.int32, count=len(names))

    def _launch_kernel_names(self, kernels: list, n: int) -> np.ndarray:
        """Local ids of the ``kernel`` arg of each event, -1 where absent (ROCm's launch calls name their
        kernel; a capture trace needs it, since the kernels it records never run). Interned into the
        name table in :meth:`finish`, after every event name, so the table does not depend on the pieces."""
        if not any(kernels):  # the strict schema's default is "", the lenient one's None
            return np.full(n, -1, dtype=np.int32)
        texts = [k if isinstance(k, str) else "" for k in kernels]
        if not any(texts):
            return np.full(n, -1, dtype=np.int32)
        local = dict.fromkeys(texts, -1)
        uniq = [t for t in local if t]
        for i, t in enumerate(uniq):  # unique texts, not events
            local[t] = len(self.kernel_texts) + i
        self.kernel_texts.extend(uniq)
        return np.fromiter(map(local.__getitem__, texts), dtype=np.int32, count=n)

    def _add_dims(self, texts: list[bytes]) -> None:
        """Input Dims as the file's own text (b"" when absent; an empty list: absent on every event
        added last); interned at the end, after every name."""
        by_bytes = dict.fromkeys(texts)
        by_text: dict[str, int] = {}
        for b in by_bytes:  # unique texts only
            by_bytes[b] = by_text.setdefault(b.decode("utf-8", "replace"), len(by_text)) if b else -1
        if len(by_text) == 0:
            return
        local = np.fromiter(map(by_bytes.__getitem__, texts), dtype=np.int32, count=len(texts))
        rows = np.flatnonzero(local >= 0)
        self.dims.append((self.n_kept - len(texts) + rows, local[rows], list(by_text)))

    def _add_flows(self, flows: list) -> None:
        n = len(flows)
        self.flows["pid"].append(self.host.column([f.pid for f in flows], n, "flow"))
        self.flows["tid"].append(self.host.column([f.tid for f in flows], n, "flow"))
        if self.strict:
            self.flows["ts_us"].append(np.fromiter([f.ts for f in flows], dtype=np.float64, count=n))
            self.flows["id"].append(_int_column([f.id for f in flows], n))
        else:
            self.flows["ts_us"].append(np.fromiter([_as_us(f.ts) for f in flows], dtype=np.float64, count=n))
            self.flows["id"].append(np.fromiter([_as_int(f.id) for f in flows], dtype=np.int64, count=n))

    def _take(self, key: str, empty: Any = np.int64) -> np.ndarray:
        """One column of every piece, concatenated; the pieces are let go (folded in, memory freed)."""
        parts = self.parts[key]
        out = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, dtype=empty)
        parts.clear()
        HEAP.trim()  # the pieces' pages go back now: freed blocks stay resident until a trim
        return out if out.flags.writeable else out.copy()  # ours to change in place (finish does)

    def _name_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """``kernel_name_id`` and ``dims_id``: their texts interned after every event name, kernels first."""
        table = self.names
        k_local = self._take("kernel_name_id", np.int32)
        k_remap = np.array([table.setdefault(t, len(table)) for t in self.kernel_texts], dtype=np.int32)
        kernel_name_id = np.where(k_local >= 0, k_remap[np.maximum(k_local, 0)] if k_remap.size else -1, -1)
        del k_local
        dims_id = np.full(self.n_kept, -1, dtype=np.int32)
        for rows, local, texts in self.dims:  # one entry per piece
            remap = np.array([table.setdefault(t, len(table)) for t in texts], dtype=np.int32)
            dims_id[rows] = remap[local]
        self.dims.clear()
        return kernel_name_id.astype(np.int32, copy=False), dims_id

    def _device_stream(self, kind: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """On GPU rows Kineto's pid is the device and tid the stream; args say so explicitly when present."""
        gpu = (kind <= Kind.GRAPH) | (kind == Kind.GPU_ANNOTATION)
        arg = self._take("device_arg")
        device = np.where(gpu, np.where(arg >= 0, arg, pid), -1)
        arg = self._take("stream_arg")
        stream = np.where(gpu, np.where(arg >= 0, arg, tid), -1)
        return device, stream

    def finish(self, path: str, device_props: Iterable[_Device] | None, dist: _DistInfo | None,
               flags: dict[str, _Flag] | None = None) -> Trace:
        """All columns, the cleaning steps of the loader, and :func:`build_trace`.

        Column by column: each is concatenated from its pieces, which are let go at once, so the peak
        is about the finished table plus a few columns (the pieces of a column and its result never
        live beside every other column's pieces and results)."""
        self.host.resolve()
        HEAP.trim()  # the pieces' buffers are gone; their holes in the heap go back before the columns grow
        ts_us, dur_us = self._take("ts_us", np.float64), self._take("dur_us", np.float64)
        warnings: list[str] = []
        # |t| < 9.2e15 us keeps t * 1000 inside int64 ns (NaN and inf fail the test too).
        keep = (np.abs(ts_us) < 9.2e15) & (np.abs(dur_us) < 9.2e15)
        if not keep.all():
            warnings.append(f"dropped {int((~keep).sum())} events without a numeric ts/dur in range")
        # Epoch-based traces have ts near 1.7e15 us: times 1000 that exceeds 2^53 and float64
        # would snap every start to a multiple of 256 ns. Subtract a whole-us base first.
        base_us = float(np.floor(ts_us[keep].min())) if keep.any() else 0.0
        if not abs(base_us) < 9.2e15:
            base_us = 0.0
        python_calls = self.python.finish(base_us)  # its pieces go before the table's columns are built
        kind = self._take("kind", np.int8).astype(np.int8, copy=False)
        pid, tid = self._take("pid"), self._take("tid")
        device, stream = self._device_stream(kind, pid, tid)
        corr = self._take("corr")
        if self.flows["id"] and ((kind <= Kind.GRAPH) & (corr < 0)).any():
            flows = {k: np.concatenate(v) for k, v in self.flows.items()}
            corr = _fill_corr_from_flows(flows, kind, pid, tid, ts_us, corr)
        self.flows = {k: [] for k in self.flows}
        if not keep.all():
            ts_us, dur_us = np.where(keep, ts_us, base_us), np.where(keep, dur_us, 0.0)
        # rint((ts - base) * 1000) + base in ns and rint(dur * 1000), the same operations in the same order,
        # in place on the builder's own columns: one column-long temporary at a time, not three
        ts_us -= base_us
        ts_us *= 1000.0
        np.rint(ts_us, out=ts_us)
        start_ns = ts_us.astype(np.int64)
        del ts_us
        start_ns += np.int64(int(base_us) * 1000)
        dur_us *= 1000.0
        np.rint(dur_us, out=dur_us)
        dur_ns = dur_us.astype(np.int64)
        del dur_us
        kernel_name_id, dims_id = self._name_columns()
        columns = {"kind": kind, "name_id": self._take("name_id", np.int32).astype(np.int32, copy=False),
                   "device": device, "stream": stream, "pid": pid, "tid": tid, "start_ns": start_ns,
                   "dur_ns": dur_ns, "corr": corr, "graph_id": self._take("graph_id"), "dims_id": dims_id,
                   "kernel_name_id": kernel_name_id}
        del kind, device, stream, pid, tid, start_ns, dur_ns, corr, kernel_name_id, dims_id
        for key in LAUNCH_CONFIG_COLUMNS:
            columns[key] = self._take(key, np.int32)
        if not keep.all():
            for key in columns:  # one column at a time
                columns[key] = columns[key][keep]
        del keep
        device_properties = _device_properties(device_props)
        HEAP.trim()
        trace = build_trace(
            path=path, format="kineto", names=list(self.names), columns=columns,
            device_names={d: p["name"] for d, p in device_properties.items() if "name" in p},
            warnings=warnings, python_calls=python_calls,
            profiler_settings=_settings_of(flags or {}, *self.settings_sample()),
            device_properties=device_properties, **_rank_of(dist),
            kernel_resources={self.names[name]: v for name, v in self.resources.items() if name in self.names})
        if not trace.gpu_mask.any():
            cats = ("MTIA trace: launchgap reads CUDA and ROCm GPU events only" if self.mtia_events
                    else "CPU-only trace" if self.n_events else "no events at all")
            raise NoGpuActivityError(f"no GPU kernels, copies or sets in the trace ({cats}); nothing to analyse", path)
        HEAP.trim()
        return trace


def _fill_corr_from_flows(flows: dict[str, np.ndarray], kind: np.ndarray, pid: np.ndarray, tid: np.ndarray,
                          ts_us: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Old Kineto versions put the correlation only on the ``ac2g`` flow end (``ph: f``).

    The flow end sits on the GPU op: same pid, tid and ts. Joined by sorting keys, not a loop.
    """
    need = np.flatnonzero((kind <= Kind.GRAPH) & (corr < 0))
    i64 = np.int64  # both keys of one type (the event columns may be narrower than the flows')
    f_key = np.rec.fromarrays([flows["pid"].astype(i64), flows["tid"].astype(i64), _ns_key(flows["ts_us"])])
    n_key = np.rec.fromarrays([pid[need].astype(i64), tid[need].astype(i64), _ns_key(ts_us[need])])
    order = np.argsort(f_key, kind="stable")
    pos = np.searchsorted(f_key[order], n_key)
    pos_ok = pos < order.size
    hit = np.zeros(need.size, dtype=bool)
    hit[pos_ok] = f_key[order[pos[pos_ok]]] == n_key[pos_ok]
    out = corr.astype(np.int64)  # a copy, wide enough for any flow id
    out[need[hit]] = flows["id"][order[pos[hit]]]
    return out


def _ns_key(ts_us: np.ndarray) -> np.ndarray:
    """Time in integer ns for joining; a missing or absurd time gets int64's minimum (what the
    float-to-int cast gives on x86, now without relying on it or warning)."""
    out = np.full(ts_us.shape, np.iinfo(np.int64).min, dtype=np.int64)
    ok = np.abs(ts_us) < 9.2e15  # False for NaN and inf too
    out[ok] = np.rint(ts_us[ok] * 1000).astype(np.int64)
    return out
