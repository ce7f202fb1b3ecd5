"""The vectorised block reading of server logs gives what the engines' regexes give line by line;
the streamed median equals numpy's; compact columns widen when a value does not fit."""
from __future__ import annotations

import random

import numpy as np
import pytest

from launchgap.serverlogs import sglang, tensorrt_llm, vllm
from launchgap.serverlogs._base import NO_YEAR, Column, _parse_stamp
from launchgap.serverlogs._scan import BlockScan, iso_stamps, month_day_stamps, read_decimal, read_uint
from launchgap.serverlogs.diagnosis import streamed_median


def _mixed_sglang_lines(n: int, seed: int = 0) -> list[str]:
    """Decode and prefill lines of every layout the reader meets, with noise between them."""
    rnd = random.Random(seed)
    tags = ["", " TP0", " TP1", " DP1 TP4 EP1", " PP0 TP2"]
    out = []
    for i in range(n):
        stamp = f"2025-11-11 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"  # hours: float32 offsets hold ms
        if rnd.random() < 0.2:
            stamp += f".{rnd.randrange(1000):03d}"
        prefix = rnd.choice([f"[{stamp}{rnd.choice(tags)}] ", f"[{stamp}{rnd.choice(tags)}] ",
                             f"{stamp} INFO 151972 [scheduler_metrics_mixin.py:287] ", ""])
        head = rnd.choice(["Decode batch. ", "Decode batch, ", f"Decode batch [{i}], ", f"Decode batch[{i}]. "])
        graph = rnd.choice(["cuda graph: True, ", "cuda graph: False, ", "npu graph: True, ", "", "cpu graph: False, "])
        tok = rnd.choice([f"{rnd.uniform(0, 1e5):.2f}", f"{rnd.randrange(10**6)}", "nan", "inf", "-3.50", "1e+05",
                          f"{rnd.uniform(0, 10):.6f}"])
        kind = rnd.random()
        if kind < 0.6:
            out.append(f"{prefix}{head}#running-req: {rnd.randrange(0, 5000)}, #token: {rnd.randrange(10**6)}, "
                       f"token usage: 0.{rnd.randrange(100):02d}, {graph}gen throughput (token/s): {tok}, "
                       f"#queue-req: {rnd.randrange(50)}{rnd.choice(['', ', '])}")
        elif kind < 0.75:
            out.append(f"{prefix}Prefill batch{rnd.choice(['. ', ', ', f' [{i}], '])}#new-seq: {rnd.randrange(1, 64)}, "
                       f"#new-token: {rnd.randrange(1, 10**5)}, #cached-token: 0, token usage: 0.01, "
                       f"#running-req: 3, #queue-req: 0, ")
        elif kind < 0.8:  # damaged: the marker without its fields, cut lines
            out.append(rnd.choice([f"{prefix}Decode batch, #running-req: ", f"{prefix}Decode batch",
                                   f"{prefix}Prefill batch. #new-seq: x", "Decode batch, #running-req: 5, gen"]))
        else:
            out.append(f"[{stamp}] INFO:     10.0.0.{i % 250}:5000 - \"POST /generate HTTP/1.1\" 200 OK")
    return out


def _by_line(lines: list[str]) -> dict:
    """What the engine's regexes read from each line on its own (the reference)."""
    r = sglang.Reader("ref")
    dec, pre, skipped = [], [], 0
    for line in lines:
        b = line.encode()
        at = b.find(b"Decode batch")
        if at >= 0:
            m = sglang._DECODE.match(b, at)
            if m is None:
                skipped += 1
            else:
                t, src = r._prefix(b, at)
                flag = m.group(2)
                dec.append((t, int(m.group(1)), -1 if flag is None else int(flag == b"True"),
                            np.float32(sglang._float(m.group(3))), r.sources.names[src]))
        at = b.find(b"Prefill batch")
        if at >= 0:
            m = sglang._PREFILL.match(b, at)
            if m is None:
                skipped += 1
            else:
                pre.append((r._prefix(b, at)[0], int(m.group(1)), int(m.group(2))))
    return {"decode": dec, "prefill": pre, "skipped": skipped}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sglang_block_reading_equals_the_regexes_line_by_line(seed):
    lines = _mixed_sglang_lines(3000, seed)
    want = _by_line(lines)
    reader = sglang.Reader("x")
    text = ("\n".join(lines) + "\n").encode()
    cut = text.find(b"\n", len(text) // 3) + 1  # two blocks: state carries across
    reader.feed(text[:cut])
    reader.feed(text[cut:])
    log = reader.finish()
    t = log.decode_time_s
    got = [(t[i], int(log.decode_batch[i]), int(log.decode_graph[i]), log.decode_tok_s[i],
            log.sources[log.decode_source[i]]) for i in range(len(log.decode_batch))]
    assert len(got) == len(want["decode"]) > 1500
    for g, w in zip(got, want["decode"]):
        assert g[1:3] == w[1:3] and g[4] == w[4]
        assert (np.isnan(g[3]) and np.isnan(w[3])) or g[3] == w[3]
        assert abs(g[0] - w[0]) < 1e-3 or (np.isnan(g[0]) and np.isnan(w[0]))  # float32 offsets from the first stamp
    assert log.prefill_batch.tolist() == [p[1] for p in want["prefill"]]
    assert log.prefill_tokens.tolist() == [p[2] for p in want["prefill"]]
    assert log.skipped_lines == want["skipped"] > 0


def test_read_decimal_and_uint_exact():
    toks = [b"0", b"7", b"968.35", b"1635.11", b"0.000001", b"12345678901234567", b"99999.99", b"3.", b"1.2.3",
            b"1e5", b"nan", b"-1.5", b"12a", b"5,"]
    scan = BlockScan(b" ".join(toks) + b"\n")
    at = np.array([0] + [len(b" ".join(toks[:i])) + 1 for i in range(1, len(toks))])
    val, ok = read_decimal(scan, at)
    for tok, v, k in zip(toks, val.tolist(), ok.tolist()):
        plain = tok.rstrip(b",")
        if k:
            assert v == float(plain), tok
        else:  # the caller reads these with float() (or skips them)
            assert plain in (b"12345678901234567", b"1.2.3", b"1e5", b"nan", b"-1.5", b"12a"), tok
    assert ok.tolist().count(True) == 8  # over 15 digits: not exact in float64 arithmetic, so float()
    v, nd = read_uint(scan.a, at[:3])
    assert v.tolist() == [0, 7, 968] and nd.tolist() == [1, 1, 3]


def test_iso_stamps_equal_the_clock():
    rows = [b"[2025-11-11 04:06:27] ", b"[2024-02-29 23:59:59.123 TP0 EP1] ", b"[1999-12-31 00:00:00 DP3] ",
            b"[2025-13-01 00:00:00] ", b"2025-11-11 04:06:27 INFO ", b"[2025-11-11 04:06:27,5] "]
    block = b"".join(r + b"Decode batch\n" for r in rows)
    scan = BlockScan(block)
    pos = scan.find(b"Decode batch")
    start, _ = scan.lines(pos)
    t, _, ok = iso_stamps(scan.a, start, pos)
    assert ok.tolist() == [True, True, True, False, False, False]
    for r, ti, k in zip(rows, t.tolist(), ok.tolist()):
        if k:
            assert ti == _parse_stamp(r)


def test_streamed_median_equals_numpy():
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 10, 1001, 50000):
        for v in (rng.normal(0, 100, n), rng.uniform(0, 1e4, n), rng.integers(0, 5, n).astype(float)):
            v = v.astype(np.float32)
            parts = np.array_split(v, 7)
            assert streamed_median(lambda parts=parts: iter(parts)) == float(np.median(v))
    assert streamed_median(lambda: iter([])) is None


def test_column_grows_in_place_and_widens():
    c = Column("i2")
    for i in range(0, 200_000, 1000):
        c.extend(np.arange(i, i + 1000) % 30000)
    assert len(c) == 200_000 and c.dtype == np.int16
    c.append(70_000)  # does not fit 16 bits: the column moves to 32
    c.extend(np.array([-5]))
    out = c.numpy()
    assert out.dtype == np.int32 and out[:3].tolist() == [0, 1, 2] and out[-2:].tolist() == [70_000, -5]
    assert (out[:200_000] == np.arange(200_000) % 30000).all()


def _read_both(module, lines: list[str], monkeypatch) -> tuple:
    """The reader's result on ``lines`` (in two blocks) block-wide and with its regexes only."""
    text = ("\n".join(lines) + "\n").encode()
    cut = text.find(b"\n", len(text) // 3) + 1
    out = []
    for fast in (True, False):
        monkeypatch.setattr(module.Reader, "fast", fast)
        r = module.Reader("x")
        r.feed(text[:cut])
        r.feed(text[cut:])
        out.append(r.finish())
    return tuple(out)


def _assert_same(a, b) -> None:
    for name in ("decode_time_s", "decode_batch", "decode_graph", "decode_tok_s", "decode_source", "prefill_time_s",
                 "prefill_batch", "prefill_tokens", "iter_time_s", "iter_batch", "iter_context", "iter_ms",
                 "iter_source"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
    assert (a.sources, a.recognised_lines, a.skipped_lines, a.time_origin_s) == \
        (b.sources, b.recognised_lines, b.skipped_lines, b.time_origin_s)


def _mixed_vllm_lines(n: int, seed: int) -> list[str]:
    """Stats lines of V0 and V1 with every prefix the reader meets, damaged ones, tables and access lines."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        stamp = f"{1 + i // 86400 % 12:02d}-{1 + i // 3600 % 28:02d} {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        if rnd.random() < 0.1:
            stamp += rnd.choice([f".{rnd.randrange(1000):03d}", f",{rnd.randrange(10)}"])
        proc = rnd.choice(["", "(APIServer pid=4242) ", "(EngineCore_DP0 pid=4377) ", "(Worker_TP1 pid=9) ",
                           "(APIServer-1 pid=3) ", "2025-11-03T08:00:00.123Z "])
        head = rnd.choice([f"{proc}INFO {stamp} [loggers.py:259] Engine {rnd.randrange(3):03d}: ",
                           f"{proc}INFO {stamp} [metrics.py:341] ", f"INFO {stamp} metrics.py:334] ",
                           f"{proc}INFO {stamp} [loggers.py:259] " + "x" * rnd.choice([0, 90]),
                           f"{proc}INFO 13-40 25:00:00 [loggers.py:259] ", ""])
        num = rnd.choice([f"{rnd.uniform(0, 5000):.1f}", "0.0", f"{rnd.randrange(10**6)}", "1.2.3", "12.",
                          "1234567890123456.7"])
        kind = rnd.random()
        if kind < 0.6:
            out.append(f"{head}Avg prompt throughput: {num} tokens/s, Avg generation throughput: "
                       f"{rnd.uniform(0, 9000):.1f} tokens/s, Running: {rnd.randrange(300)} reqs, "
                       + rnd.choice(["Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 4.1%.",
                                     "Waiting: 0 reqs, GPU KV cache usage: 2.3%, Prefix cache hit rate: 0.0%"]))
        elif kind < 0.7:  # damaged
            out.append(rnd.choice([f"{head}Avg prompt throughput: ", f"{head}Avg prompt throughput: 1.0 tokens/s, Run",
                                   f"{head}Avg prompt throughput: 3.0 tokens/s, Avg generation throughput: 4.0 tokens/s,"
                                   f" Running: x reqs"]))
        elif kind < 0.85:
            out.append(f"{proc}INFO {stamp} [cuda_graph.py:124] | {rnd.randrange(64)} | 64 | 3 | FULL | 16 |")
        else:
            out.append(f'{proc}INFO:     127.0.0.1:45565 - "POST /v1/chat/completions HTTP/1.1" 200 OK')
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_vllm_block_reading_equals_the_regexes(seed, monkeypatch):
    fast, slow = _read_both(vllm, _mixed_vllm_lines(4000, seed), monkeypatch)
    assert len(fast.decode_batch) > 1500 and len(fast.prefill_time_s) > 1000 and fast.skipped_lines > 100
    _assert_same(fast, slow)


def test_month_day_stamps_equal_the_clock():
    rows = [b"INFO 11-03 08:00:00 [x.py:1] ", b"(APIServer pid=1) INFO 02-29 23:59:59.123 [x.py:1] Engine 000: ",
            b"INFO 01-22 18:27:20,5 ", b"INFO 13-01 00:00:00 ", b"2025-11-03T08:00:00Z INFO 11-03 08:00:00 ",
            b"(API-1) INFO 11-03 08:00:00 ", b"INFO 11-03 08:00:00"]
    block = b"".join(r + b"Avg prompt throughput:\n" for r in rows)
    scan = BlockScan(block)
    pos = scan.find(b"Avg prompt throughput:")
    start, _ = scan.lines(pos)
    t, _, ok = month_day_stamps(scan.a, start, pos, NO_YEAR)
    assert ok.tolist() == [True, True, True, False, False, False, False]
    for r, ti, k in zip(rows, t.tolist(), ok.tolist()):
        if k:
            assert ti == _parse_stamp(r)


_TRT_OLD = ("[05/01/2025-10:00:{s:02d}] [TRT-LLM] [I] iter = {i}, global_rank = {r}, rank = {r}, currank_total_requests"
            " = {n}/{n}, host_step_time = 9.0{sp}ms, prev_device_step_time = {prev}, timestamp = 2025-05-01 "
            "10:{m:02d}:{s:02d}, num_scheduled_requests: {n}, states = {{'num_ctx_requests': {c}, 'num_ctx_tokens': 0, "
            "'num_generation_tokens': {n}}}")
_TRT_NEW = ("[05/01/2025-10:00:{s:02d}] [TRT-LLM] [I] [_torch][RANK {r}] iter = {i}, global_rank = {r}, rank = {r}, "
            "num_scheduled_requests = {n}, kv_cache_util = 0.125, currank_total_requests = {n}/{n}, host_step_time = "
            "9.0{sp}ms, prev_device_step_time = {prev}, timestamp = 2025-05-01 10:{m:02d}:{s:02d}, states = {{"
            "'num_ctx_requests': {c}, 'num_ctx_tokens': 0, 'num_generation_tokens': {n}}}, num_active = 3")


def _mixed_trt_lines(n: int, seed: int, odd: float) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        prev = "N/A" if i % 500 == 0 else rnd.choice([f"{rnd.uniform(1, 50):.3f}ms", f"{rnd.uniform(1, 50):.2f} ms",
                                                      f"{rnd.randrange(1, 50)}ms", "7.5"])
        fmt = _TRT_OLD if (i // 700) % 2 == 0 else _TRT_NEW
        rank = 0 if rnd.random() > odd else 1
        out.append(fmt.format(s=i % 60, m=i // 60 % 60, i=i, r=rank, n=rnd.randrange(1, 300), c=int(rnd.random() < 0.05),
                              prev=prev, sp=rnd.choice(["", " "])))
        if rnd.random() < odd:
            out.append(rnd.choice(["iter = 99, global_rank = 0, damaged", "[TRT-LLM] [I] iter = 5, rank = 0, x",
                                   _TRT_OLD.replace("{prev}", "1.2.3ms").format(s=1, m=1, i=i, r=0, n=3, c=0, sp="")]))
        if rnd.random() < 0.01:
            out.append("[TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=8, draft_len=0")
    return out


@pytest.mark.parametrize("odd", [0.0, 0.002, 0.05])
def test_tensorrt_llm_block_reading_equals_the_regexes(odd, monkeypatch):
    fast, slow = _read_both(tensorrt_llm, _mixed_trt_lines(4000, 7, odd), monkeypatch)
    assert len(fast.iter_batch) > 3500 and np.isfinite(fast.iter_ms).sum() > 3000
    _assert_same(fast, slow)


def test_tensorrt_llm_columns_numpy_equal_findall():
    block = ("\n".join(_mixed_trt_lines(3000, 3, 0.0)) + "\n").encode()
    want = tensorrt_llm.Reader._regex_columns(block)
    got = tensorrt_llm.Reader._scan_columns(BlockScan(block))
    assert want is not None and got is not None  # the plain block takes the numpy path
    assert got[0] == want[0] and got[1].tolist() == want[1].tolist()
    for x, y in zip(got[2:], want[2:]):
        assert np.array_equal(x, y, equal_nan=True)
    damaged = block.replace(b"prev_device_step_time = 7.5,", b"prev_device_step_time = 7.5.1,", 1)
    assert damaged != block  # a device time the regex takes and float() refuses: neither reads the block
    assert tensorrt_llm.Reader._scan_columns(BlockScan(damaged)) is None
    assert tensorrt_llm.Reader._regex_columns(damaged) is None
