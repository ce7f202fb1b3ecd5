#!/usr/bin/env bash
# Issue 16's end-to-end check: a planned capture list against vLLM's default list, same model,
# same batch-size sequence, one process (throughput rounds interleaved between the lists).
#
#   bash bench/gpu_e2e.sh OUT --capture-sizes PLAN [--distribution FILE] [--model 1b] [--steps 200]
#                         [--rounds 7] [--seed 1] [--dry-run]
#
# PLAN: the planner's list: a `launchgap plan --format json` output (its "buckets"), a vLLM
# config ({"cudagraph_capture_sizes": [...]}), a JSON list, or plain text "1,2,4,8" (commas or
# whitespace). FILE: the batch-size histogram the plan was made from (JSON {"bs": count} or CSV;
# default bench/serving_distribution.json); --steps draws that many steps from it (seeded).
# Prints decode throughput (real tokens/s over the sequence, unprofiled), graph memory (device
# memory used as the driver sees it, and allocator reserved) and capture seconds side by side,
# and the goal of issue 16: >= 99% of the default's throughput with <= 50% of its graph memory
# and capture time. Writes OUT/e2e/timings.json, the two sequence traces and OUT/e2e.log.
# Needs python3 with torch + CUDA (PYTHON to override); time-boxed to 540 s.
set -u -o pipefail

OUT=${1:?usage: bash bench/gpu_e2e.sh OUT --capture-sizes PLAN [--distribution FILE] [--model M] [--dry-run]}
shift
PLAN="" DIST=bench/serving_distribution.json MODEL=1b STEPS=200 ROUNDS=7 SEED=1 DRY=""
while [ $# -gt 0 ]; do
  case $1 in
    --capture-sizes) PLAN=$2; shift 2 ;;
    --distribution) DIST=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --dry-run) DRY=--dry-run; shift ;;
    *) echo "gpu_e2e.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$PLAN" ] || { echo "gpu_e2e.sh: --capture-sizes PLAN is required" >&2; exit 2; }
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
LOG="$OUT/e2e.log"

SIZES=$("$PY" - "$PLAN" <<'PY'
import json
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
try:
    doc = json.loads(text)
except json.JSONDecodeError:
    doc = [int(x) for x in re.split(r"[\s,]+", text.strip()) if x]
if isinstance(doc, dict):
    for key in ("buckets", "capture_sizes", "cudagraph_capture_sizes"):
        if key in doc:
            doc = doc[key]
            break
    else:
        doc = (doc.get("configs") or {}).get("vllm", {}).get("cudagraph_capture_sizes")
if not isinstance(doc, list) or not doc or not all(isinstance(x, int) and x > 0 for x in doc):
    sys.exit(f"{sys.argv[1]}: no capture list found (expected buckets, a JSON list or 1,2,4,...)")
print(",".join(str(x) for x in sorted(set(doc))))
PY
) || exit 2

echo "planned list: $SIZES" | tee "$LOG"
timeout --signal=TERM --kill-after=10 540 "$PY" -m analyzer.harness --model "$MODEL" \
  --capture-sizes "planned=$SIZES" --capture-sizes vllm-default --distribution "$DIST" --serving-steps "$STEPS" \
  --serving-rounds "$ROUNDS" --repeats 20 --warmup 3 --seed "$SEED" --out "$OUT/e2e" $DRY 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
[ -n "$DRY" ] && exit "$rc"
[ "$rc" = 0 ] || { echo "gpu_e2e.sh: the harness exited $rc" | tee -a "$LOG"; exit "$rc"; }

"$PY" - "$OUT/e2e/timings.json" <<'PY' 2>&1 | tee -a "$LOG"
import statistics
import sys

from analyzer.timings import load_timings

runs = {e["list_name"]: e for e in load_timings(sys.argv[1])["serving"]}
plan, base = runs["planned"], runs["vllm-default"]


def num(x, spec):
    return "-" if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def spread(e):
    xs = [e["tokens"] / (t / 1e6) for t in e["sequence_total_us_rounds"]]
    return min(xs), max(xs)


print(f"\n{plan['model']}, {len(plan['steps'])} steps ({plan['distribution']}), "
      f"{plan['rounds']} interleaved rounds")
print(f"{'list':<13} {'graphs':>6} {'tokens/s':>9} {'min..max':>17} {'device MiB':>10} {'reserved MiB':>12} "
      f"{'capture s':>9} {'uncaptured':>10} {'padded rows':>11}")
for e in (plan, base):
    lo, hi = spread(e)
    print(f"{e['list_name']:<13} {len(e['capture_sizes']):>6} {e['throughput_tokens_per_s']:>9,.0f} "
          f"{f'{lo:,.0f}..{hi:,.0f}':>17} {num(e['device_used_mib'], ',.1f'):>10} "
          f"{num(e['reserved_mib'], ',.1f'):>12} {num(e['capture_s'], '.2f'):>9} {len(e['uncaptured_steps']):>10} "
          f"{e['padded_rows']:>11}")
tput = ratio(plan["throughput_tokens_per_s"], base["throughput_tokens_per_s"])
mem = ratio(plan["device_used_mib"], base["device_used_mib"])
cap = ratio(plan["capture_s"], base["capture_s"])
per_round = [b / a for a, b in zip(plan["sequence_total_us_rounds"], base["sequence_total_us_rounds"])]
print(f"\nplanned / default: throughput {tput:.2%} (per round {min(per_round):.2%}..{max(per_round):.2%}, "
      f"median {statistics.median(per_round):.2%}), device memory {num(mem, '.1%')}, capture time {num(cap, '.1%')}")
if mem is None or cap is None:
    print("goal: not judged (no graph memory or capture time: recorded without CUDA)")
else:
    goal = tput >= 0.99 and mem <= 0.5 and cap <= 0.5
    print(f"goal (>= 99% throughput, <= 50% memory and capture time): {'met' if goal else 'not met'}")
PY
