"""Fuzzing the Nsight Systems SQLite loader: random bytes behind the SQLite magic, random databases,
the real export schema with mutated values, and corrupted copies of valid exports.

Property (see :mod:`tests.fuzz`): load + analyse succeeds with a JSON-safe report of possible
times or raises an AnalyzerError naming the file in one line; the CLI exits 0 or 2. The seed export is built with
:mod:`tests.builders` (two processes that both call their GPU "device 0", eager launches, a copy,
a set, a sync, per-node graph kernels, a whole-graph replay, NVTX steps); the bundled
``traces/nsys/healthy_1pct.sqlite`` (nsys-ai's minimal 6-table export) is a seed as well (copied, never
opened in place).
"""
from __future__ import annotations

import functools
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from launchgap.errors import TraceTooLargeError
from launchgap.loaders import load_trace
from launchgap.loaders._io import SQLITE_MAGIC
from launchgap.loaders.nsys import RUNTIME_TABLES
from tests.builders import NSYS_COLUMNS, GpuOp, GraphReplay, TraceSpec
from tests.fuzz import CORPUS, SETTINGS, check_cli, check_load_analyze, fresh_path

#: The bundled minimal export (tests/conftest.py's ``reference_traces`` / "nsys").
HEALTHY = Path(__file__).resolve().parents[2] / "traces" / "nsys" / "healthy_1pct.sqlite"


def seed_spec() -> TraceSpec:
    """Two decode steps of an nsys export that fill every table the loader reads (times in ns)."""
    s = TraceSpec(device_names={0: "NVIDIA H200", 1: "NVIDIA H200"}, cuda_devices=[(100, 0, 0), (200, 0, 1)])
    s.annotate("decode_step[bs=4]", 0, 100_000)
    s.launch("gemm_bf16", 1_000, 5_000, 10_000, 20_000, corr=1)
    s.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7_000, 4_000, 31_000, 15_000, corr=2)
    s.call("cudaMemcpyAsync", 25_000, 3_000, corr=3)
    s.ops.append(GpuOp("Memcpy DtoH", 47_000, 2_000, 3, kind="memcpy"))
    s.call("cudaMemsetAsync", 29_000, 2_000, corr=4)
    s.ops.append(GpuOp("Memset", 50_000, 1_000, 4, kind="memset"))
    s.call("cudaStreamSynchronize", 35_000, 20_000)
    s.annotate("decode_step[bs=4]", 200_000, 100_000)
    s.graph_launch(205_000, 10_000, corr=10, graph_id=1, kernels=[("node0", 220_000, 5_000), ("node1", 226_000, 5_000)])
    s.call("cudaGraphLaunch", 260_000, 10_000, corr=11)
    s.replays.append(GraphReplay(graph_id=2, start_ns=275_000, dur_ns=20_000, corr=11))
    # A second process whose own "device 0" is another GPU (CUDA_VISIBLE_DEVICES).
    s.launch("other_process_kernel", 5_000, 4_000, 12_000, 8_000, corr=1, pid=200, tid=2)
    return s


@functools.cache
def seed_bytes(variant: str) -> bytes:
    """The seed export as file bytes; ``variant`` picks NVTX push/pop with inline text or
    start/end ranges with text in StringIds, or the bundled healthy_1pct export."""
    if variant == "healthy_1pct":
        return HEALTHY.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "seed.sqlite"
        nvtx, text = {"pushpop": ("pushpop", "text"), "startend": ("startend", "textId")}[variant]
        seed_spec().write_nsys(p, nvtx=nvtx, nvtx_text=text)
        return p.read_bytes()


SEEDS = ("pushpop", "startend", "healthy_1pct")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_nsys")


def _write(folder: Path, data: bytes) -> Path:
    p = fresh_path(folder, ".sqlite")
    p.write_bytes(data)
    return p


# ---- values -------------------------------------------------------------------------------------
#: Values SQLite can hold, weighted to the awkward ones: NULL, text in integer columns, ids past
#: 32/64 bits, non-finite reals, blobs, and text that is not valid UTF-8.
SQL_VALUES = st.one_of(
    st.none(), st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, -1, 1, 2**31, 2**32, 2**48 + 5, 2**62, 2**63 - 1, -(2**63), 59, 60]),
    st.floats(allow_nan=False), st.sampled_from([float("inf"), float("-inf"), 1e300, -1e300, 0.5]),
    st.text(max_size=10), st.sampled_from(["", "abc", "123", "0x10", "1e3", " 7", "-"]),
    st.binary(max_size=8), st.just(b"\xff\xfe\xfd"),
)
#: SQL expressions for values the Python driver cannot bind: TEXT that is not UTF-8.
SQL_EXPRS = st.sampled_from(["CAST(x'fffe41' AS TEXT)", "CAST(x'00' AS TEXT)", "zeroblob(4)", "NULL", "'x'"])
KNOWN_TABLES = tuple(NSYS_COLUMNS)
KNOWN_COLUMNS = tuple(sorted({c for cols in NSYS_COLUMNS.values() for c in cols} | {"mangledName", "textId"}))


# ---- random bytes --------------------------------------------------------------------------------
@SETTINGS
@given(data=st.one_of(
    st.binary(max_size=4096).map(lambda b: SQLITE_MAGIC + b),
    # A real header (page size, encoding...) followed by random bytes.
    st.tuples(st.sampled_from(("pushpop", "startend")), st.binary(min_size=0, max_size=2048)).map(
        lambda t: seed_bytes(t[0])[:100] + t[1]),
))
def test_fuzz_sqlite_magic_random_bytes(folder, data) -> None:
    check_load_analyze(_write(folder, data))


# ---- random databases ------------------------------------------------------------------------------
@st.composite
def random_database(draw) -> list[tuple[str, list[str], list[tuple]]]:
    """Tables (known nsys names or random ones) with columns (known or random) and random rows."""
    tables = []
    names = draw(st.lists(st.one_of(st.sampled_from(KNOWN_TABLES + RUNTIME_TABLES), st.from_regex(r"[A-Za-z_]{1,12}",
                                                                                                   fullmatch=True)),
                          min_size=1, max_size=5, unique_by=str.lower))
    for name in names:
        # Most of the real columns of the table (of the runtime table for other names), so the
        # loader's queries run on it.
        kind = NSYS_COLUMNS.get(name, NSYS_COLUMNS["CUPTI_ACTIVITY_KIND_RUNTIME"])
        real = [c for c in kind if draw(st.integers(0, 4))]
        extra = draw(st.lists(st.one_of(st.sampled_from(KNOWN_COLUMNS), st.from_regex(r"[A-Za-z_]{1,8}",
                                                                                      fullmatch=True)),
                              max_size=4))
        cols = list({c.lower(): c for c in [*real, *extra]}.values()) or ["x"]
        rows = draw(st.lists(st.tuples(*[SQL_VALUES] * len(cols)), max_size=6))
        tables.append((name, cols, rows))
    return tables


def _connect(path: Path) -> sqlite3.Connection:
    """A connection for writing test files: no journal, no fsync (examples are throwaway)."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    return db


def _create(path: Path, tables: list[tuple[str, list[str], list[tuple]]]) -> None:
    with closing(_connect(path)) as db:
        for name, cols, rows in tables:
            db.execute(f'CREATE TABLE "{name}" ({", ".join(chr(34) + c + chr(34) for c in cols)})')
            db.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(cols))})', rows)
        db.commit()


@SETTINGS
@given(tables=random_database())
def test_fuzz_random_databases(folder, tables) -> None:
    p = fresh_path(folder, ".sqlite")
    _create(p, tables)
    check_load_analyze(p)


@SETTINGS
@given(tables=random_database(), view=st.sampled_from(KNOWN_TABLES),
       body=st.sampled_from(["SELECT 1 AS start, 2 AS \"end\"", "SELECT * FROM no_such_table",
                             "SELECT start, \"end\" FROM CUPTI_ACTIVITY_KIND_RUNTIME"]))
def test_fuzz_random_databases_with_views(folder, tables, view, body) -> None:
    """A view where the loader expects a table, possibly one that fails when read."""
    p = fresh_path(folder, ".sqlite")
    _create(p, [t for t in tables if t[0].lower() != view.lower()])
    with closing(_connect(p)) as db:
        try:
            db.execute(f'CREATE VIEW "{view}" AS {body}')
        except sqlite3.OperationalError:  # this SQLite checks the view's tables at creation
            pass
        db.commit()
    check_load_analyze(p)


# ---- the real schema, mutated values ---------------------------------------------------------------
def _tables_and_columns(db: sqlite3.Connection) -> dict[str, list[str]]:
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: [r[1] for r in db.execute(f'PRAGMA table_info("{t}")')] for t in names}


@st.composite
def mutations(draw) -> list[tuple]:
    """Operations on the seed export, resolved against its tables when applied (see :func:`_mutate`)."""
    op = st.sampled_from(["set_row", "set_row", "set_row", "set_all", "set_expr", "swap_times", "delete_row",
                          "delete_string", "drop_table", "drop_column", "insert_junk", "unknown_string_id"])
    return draw(st.lists(st.tuples(op, st.sampled_from(KNOWN_TABLES + RUNTIME_TABLES), st.integers(0, 1000),
                                   st.integers(0, 1000), SQL_VALUES, SQL_EXPRS), min_size=1, max_size=6))


def _mutate(db: sqlite3.Connection, ops: list[tuple]) -> None:
    """Apply ``ops``: (op, table, row/column selectors, value, SQL expression). Tables or columns the
    export lacks are skipped; integer selectors pick a row or column modulo how many there are. An
    operation SQLite itself refuses (dropping a primary key, a text rowid) is skipped too."""
    for op, table, a, b, value, expr in ops:
        try:
            _mutate_one(db, op, table, a, b, value, expr)
        except sqlite3.Error:
            pass
    db.commit()


def _mutate_one(db: sqlite3.Connection, op: str, table: str, a: int, b: int, value: object, expr: str) -> None:
    schema = _tables_and_columns(db)
    if table not in schema:
        return
    cols = schema[table]
    col = cols[b % len(cols)]
    n = db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    rowid = db.execute(f'SELECT rowid FROM "{table}" LIMIT 1 OFFSET ?', (a % n,)).fetchone()[0] if n else None
    if op == "set_row" and rowid is not None:
        db.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (value, rowid))
    elif op == "set_all":
        db.execute(f'UPDATE "{table}" SET "{col}" = ?', (value,))
    elif op == "set_expr" and rowid is not None:
        db.execute(f'UPDATE "{table}" SET "{col}" = {expr} WHERE rowid = ?', (rowid,))
    elif op == "swap_times" and {"start", "end"} <= set(cols):  # end before start
        db.execute(f'UPDATE "{table}" SET start = "end", "end" = start')
    elif op == "delete_row" and rowid is not None:
        db.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rowid,))
    elif op == "delete_string" and "StringIds" in schema:  # names pointing nowhere
        db.execute("DELETE FROM StringIds WHERE id = ?", (a % 16,))
    elif op == "unknown_string_id" and rowid is not None:
        for c in {"demangledName", "shortName", "nameId", "textId"} & set(cols):
            db.execute(f'UPDATE "{table}" SET "{c}" = ? WHERE rowid = ?', (2**62 + a, rowid))
    elif op == "drop_table":
        db.execute(f'DROP TABLE "{table}"')
    elif op == "drop_column" and len(cols) > 1:
        db.execute(f'ALTER TABLE "{table}" DROP COLUMN "{col}"')
    elif op == "insert_junk":
        db.execute(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(cols))})', (value,) * len(cols))


@pytest.mark.parametrize("variant", SEEDS)
def test_fuzz_seed_analyses(folder, variant) -> None:
    """The seeds themselves load and analyse: mutations start from exports that work."""
    assert check_load_analyze(_write(folder, seed_bytes(variant))) == "ok"


@SETTINGS
@given(variant=st.sampled_from(SEEDS), ops=mutations())
def test_fuzz_mutated_schema_values(folder, variant, ops) -> None:
    p = _write(folder, seed_bytes(variant))
    with closing(_connect(p)) as db:
        _mutate(db, ops)
    check_load_analyze(p)


@SETTINGS
@given(variant=st.sampled_from(SEEDS), ops=mutations())
def test_fuzz_mutated_schema_values_cli(folder, variant, ops) -> None:
    p = _write(folder, seed_bytes(variant))
    with closing(_connect(p)) as db:
        _mutate(db, ops)
    check_cli(p)


# ---- corrupted copies of valid exports -------------------------------------------------------------
#: (seed, damages): each damage is (op, position selector, page selector, payload); see :func:`corrupt`.
CORRUPTED_EXPORT = st.tuples(st.sampled_from(SEEDS), st.lists(st.tuples(
    st.sampled_from(["truncate", "truncate_page", "flip", "zero_page", "junk_page", "swap_pages", "overwrite"]),
    st.integers(0, 2**20), st.integers(0, 2**10), st.binary(min_size=1, max_size=32)), min_size=1, max_size=4))


def corrupt(case: tuple[str, list[tuple]]) -> bytes:
    """Damage a seed export at the byte or page level; selectors wrap around the file's size."""
    seed, ops = case
    data = bytearray(seed_bytes(seed))
    page = int.from_bytes(data[16:18], "big") or 65536
    for op, at, pg_sel, payload in ops:
        n_pages = max(len(data) // page, 1)
        pos = at % len(data) if data else 0
        pg = (pg_sel % n_pages) * page
        if op == "truncate":
            del data[pos:]
        elif op == "truncate_page":
            del data[pg:]
        elif op == "flip" and data:
            data[pos] ^= 1 << (pg_sel % 8)
        elif op == "zero_page":
            data[pg:pg + page] = bytes(len(data[pg:pg + page]))
        elif op == "junk_page":  # the payload repeated over the page: junk that shrinks to a few bytes
            data[pg:pg + page] = (payload * (page // len(payload) + 1))[:len(data[pg:pg + page])]
        elif op == "swap_pages":
            other = (at % n_pages) * page
            one, two = bytes(data[pg:pg + page]), bytes(data[other:other + page])
            if len(one) == len(two):
                data[pg:pg + page], data[other:other + page] = two, one
        elif op == "overwrite":
            data[pos:pos + len(payload)] = payload
    return bytes(data)


@SETTINGS
@given(case=CORRUPTED_EXPORT)
def test_fuzz_corrupted_exports(folder, case) -> None:
    check_load_analyze(_write(folder, corrupt(case)))


@SETTINGS
@given(case=CORRUPTED_EXPORT)
def test_fuzz_corrupted_exports_cli(folder, case) -> None:
    check_cli(_write(folder, corrupt(case)))


def test_fuzz_original_export_untouched(folder) -> None:
    """The loader opens read-only: loading a copy leaves its bytes as they were."""
    p = _write(folder, seed_bytes("pushpop"))
    load_trace(p)
    assert p.read_bytes() == seed_bytes("pushpop")


def test_fuzz_export_over_cap_refused(folder) -> None:
    p = _write(folder, seed_bytes("pushpop"))
    with pytest.raises(TraceTooLargeError, match="cap"):
        load_trace(p, p.stat().st_size - 1)


# ---- regression corpus -----------------------------------------------------------------------------
NSYS_CORPUS = sorted(p for p in CORPUS.glob("nsys_*") if p.suffix in (".sql", ".sqlite"))


def corpus_export(folder: Path, entry: Path) -> Path:
    """A corpus entry as a database file: ``.sql`` entries (small, diffable) are built here;
    ``.sqlite`` entries are damaged files that SQL cannot write, copied as they are."""
    p = fresh_path(folder, ".sqlite")
    if entry.suffix == ".sqlite":
        p.write_bytes(entry.read_bytes())
        return p
    with closing(_connect(p)) as db:
        db.executescript(entry.read_text())
    return p


@pytest.mark.parametrize("entry", NSYS_CORPUS, ids=[p.name for p in NSYS_CORPUS])
def test_fuzz_corpus_nsys(folder, entry) -> None:
    """Inputs the fuzzer once found crashing: now refused or analysed, in the library and the CLI."""
    p = corpus_export(folder, entry)
    check_load_analyze(p)
    check_cli(p)

