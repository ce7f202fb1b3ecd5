"""The vectorised block reading of server logs gives what the engines' regexes give line by line;
the streamed median equals numpy's; compact columns widen when a value does not fit."""
from __future__ import annotations

import random

import numpy as np
import pytest

from launchgap.serverlogs import sglang
from launchgap.serverlogs._base import Column, _parse_stamp
from launchgap.serverlogs._scan import BlockScan, iso_stamps, read_decimal, read_uint
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
            assert plain in (b"1.2.3", b"1e5", b"nan", b"-1.5", b"12a"), tok
    assert ok.tolist().count(True) == 9
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
