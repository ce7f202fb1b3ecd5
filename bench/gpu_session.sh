#!/usr/bin/env bash
# One GPU session of the recording harness (issues 15, 16, 17): about 8 minutes on one H200.
#
#   bash bench/gpu_session.sh OUT              # from the repo root, on a machine with torch + CUDA
#   bash bench/gpu_session.sh OUT --dry-run    # anywhere: each part's plan, nothing recorded
#
# Needs python3 with torch (and pytest for the GPU tests); nothing else. Environment:
# PYTHON (default python3), BUDGET_S (default 540: the whole script's wall-time box; parts
# that would not fit are cut short or skipped, and packing still runs).
#
# Parts, in priority order (each time-boxed with `timeout`):
#   gpu-tests        tests/integration/test_harness_gpu.py
#   overhead         B: tiny,1b,8b at 1,8,64: eager/graph rows + unprofiled eager before/after an eager
#                    trace under each profiler setting (plain, shapes, stack)
#   piecewise        C(i): 1b at 1,8,32,64 in eager, FULL graph and piecewise modes, with traces
#   serving          C(iii): 1b, capture list 1,2,4,8,16..64 step 8, 48 steps drawn from
#                    bench/serving_distribution.json, 4 injected fallbacks, trace + truth
#   fullrange        C(ii): 1b FULL graph at every size 1..64 (exact padding cost)
#   memory-1b/-8b    D: graph memory of pow2-128, vllm-default, all-1-128, single-128, full and piecewise
#   memory-3b        D, held out: 3b (Llama-3.2-3B dims) full on the presets, piecewise on two of them
#   piecewise-3b     C(i), held out: 3b at 8,32
#   serving-3b       C(iii), held out: 3b on the same list and sequence
# Files written into OUT (at most 8): session.log (everything; the summary table last),
# timings_{overhead,piecewise,serving,fullrange,memory}.json, traces_1.tar, traces_2.tar
# (every trace, packed into at most two tars of at most 15.5 MB; any left over is named in the log).
set -u -o pipefail

OUT=${1:?usage: bash bench/gpu_session.sh OUT [--dry-run]}
DRY=0
[ "${2:-}" = "--dry-run" ] && DRY=1
PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-540}
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/launchgap-session.XXXXXX")
LOG="$OUT/session.log"
: >"$LOG"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
T0=$(date +%s)
STATUS_FILE="$WORK/status.txt"
: >"$STATUS_FILE"

say() { echo "$*" | tee -a "$LOG"; }

# part NAME LIMIT_S CMD...: run CMD time-boxed to min(LIMIT_S, what the budget has left), log it.
part() {
  local name=$1 limit=$2
  shift 2
  local now left rc t dt
  now=$(date +%s)
  left=$((BUDGET_S - (now - T0) - 25))  # keep 25 s for packing and the summary
  if [ "$left" -lt 20 ]; then
    say "=== $name: skipped (budget spent)"
    echo "$name skipped 0" >>"$STATUS_FILE"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "=== $name (time box ${limit}s, at $((now - T0))s): $*"
  t=$(date +%s)
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  rc=$?
  dt=$(($(date +%s) - t))
  say "=== $name: exit $rc after ${dt}s"
  echo "$name $rc $dt" >>"$STATUS_FILE"
}

# rec NAME LIMIT_S HARNESS_ARGS...: the harness (plan only with --dry-run).
rec() {
  local name=$1 limit=$2
  shift 2
  if [ "$DRY" = 1 ]; then
    part "$name" 60 "$PY" -m analyzer.harness "$@" --dry-run
  else
    part "$name" "$limit" "$PY" -m analyzer.harness "$@"
  fi
}

SERVE_LIST="serve=1,2,4,8,16,24,32,40,48,56,64"
DIST=bench/serving_distribution.json
PRESETS="pow2-128,vllm-default,all-1-128,single-128"

if [ "$DRY" = 0 ]; then
  part env 30 bash -c "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; \
$PY -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())'"
  part gpu-tests 100 "$PY" -m pytest -q -p no:cacheprovider tests/integration/test_harness_gpu.py
else
  part gpu-tests 60 "$PY" -m pytest -q -p no:cacheprovider --collect-only tests/integration/test_harness_gpu.py
fi

rec overhead 170 --model tiny,1b,8b --batch-sizes 1,8,64 --modes eager,graph --repeats 25 --rounds 2 --warmup 3 \
  --steps 3 --no-trace --profiler-settings plain,shapes,stack --out "$WORK/overhead"
rec piecewise 70 --model 1b --batch-sizes 1,8,32,64 --modes eager,graph,piecewise --repeats 30 --rounds 3 \
  --warmup 3 --steps 3 --no-micro --out "$WORK/piecewise"
rec serving 60 --model 1b --capture-sizes "$SERVE_LIST" --distribution "$DIST" --serving-steps 48 \
  --inject-fallbacks 4 --repeats 20 --warmup 3 --serving-rounds 5 --seed 1 --out "$WORK/serving"
rec fullrange 60 --model 1b --batch-sizes 1..64 --modes graph --repeats 30 --rounds 2 --warmup 3 --no-trace \
  --no-micro --out "$WORK/fullrange"
rec memory-1b 80 --model 1b --capture-lists "$PRESETS" --memory-modes full,piecewise --out "$WORK/memory"
rec memory-8b 110 --model 8b --capture-lists "$PRESETS" --memory-modes full,piecewise --out "$WORK/memory"
rec memory-3b-full 60 --model 3b --capture-lists "$PRESETS" --memory-modes full --out "$WORK/memory"
rec memory-3b-piecewise 40 --model 3b --capture-lists pow2-128,single-128 --memory-modes piecewise \
  --out "$WORK/memory"
rec piecewise-3b 50 --model 3b --batch-sizes 8,32 --modes eager,graph,piecewise --repeats 30 --rounds 3 \
  --warmup 3 --steps 3 --no-micro --out "$WORK/piecewise"
rec serving-3b 50 --model 3b --capture-sizes "$SERVE_LIST" --distribution "$DIST" --serving-steps 48 \
  --inject-fallbacks 4 --repeats 20 --warmup 3 --serving-rounds 5 --seed 1 --out "$WORK/serving"

# Pack: timings files as they are, traces into at most two tars; then the summary, last.
"$PY" - "$WORK" "$OUT" "$STATUS_FILE" <<'PY' 2>&1 | tee -a "$LOG"
import shutil
import sys
import tarfile
from pathlib import Path

from analyzer.errors import AnalyzerError
from analyzer.timings import load_timings

work, out, status = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
LIMIT = int(15.5 * 2**20)
docs = {}
for part in ("overhead", "piecewise", "serving", "fullrange", "memory"):
    src = work / part / "timings.json"
    if src.exists():
        shutil.copyfile(src, out / f"timings_{part}.json")
        try:
            docs[part] = load_timings(src)
        except AnalyzerError as exc:
            print(f"unreadable: {exc}")
traces = sorted(work.glob("*/*.json.gz"), key=lambda p: -p.stat().st_size)
bins, left = [[], []], []
sizes = [0, 0]
for t in traces:  # largest first into whichever tar has room (tar headers ~1 kB each)
    need = t.stat().st_size + 2048
    i = min(range(2), key=lambda k: sizes[k])
    if sizes[i] + need > LIMIT:
        i = 1 - i
    if sizes[i] + need > LIMIT:
        left.append(t)
        continue
    bins[i].append(t)
    sizes[i] += need
for i, files in enumerate(bins):
    if files:
        with tarfile.open(out / f"traces_{i + 1}.tar", "w") as tar:
            for f in sorted(files):
                tar.add(f, arcname=f"{f.parent.name}/{f.name}")
print(f"traces: {len(traces)} files, tars of {sizes[0] / 2**20:.1f} and {sizes[1] / 2**20:.1f} MiB"
      + (f"; left out (over 2 x 15.5 MB): {', '.join(f'{p.parent.name}/{p.name}' for p in left)}" if left else ""))

print("\n==================== summary ====================")
print("parts (name, exit status, seconds): "
      + "; ".join(" ".join(line.split()) for line in status.read_text().splitlines()))


def num(x, spec=",.1f"):
    return "-" if x is None else format(x, spec)


if "overhead" in docs:
    print("\nB  profiled vs unprofiled (unprofiled eager step before/after an eager trace, us)")
    print(f"{'model':<6} {'bs':>3} {'profiler':<7} {'before':>10} {'after':>10} {'drift %':>8} {'graph':>9}")
    for r in docs["overhead"].get("profiled_vs_unprofiled") or []:
        b, a = r["unprofiled_eager_us_before"], r["unprofiled_eager_us_after"]
        print(f"{r['model']:<6} {r['batch_size']:>3} {r['profiler']:<7} {b:>10,.1f} {a:>10,.1f} "
              f"{100 * (a / b - 1):>8.1f} {num(r['unprofiled_graph_us']):>9}")
if "piecewise" in docs:
    print("\nC(i)  eager / FULL graph / piecewise (unprofiled us per step)")
    print(f"{'model':<6} {'bs':>3} {'eager':>10} {'graph':>9} {'piecewise':>10} {'pw/graph':>8} {'replays ok':>10}")
    for r in docs["piecewise"]["rows"]:
        g, p = r.get("graph_us"), r.get("piecewise_us")
        ok = f"{r.get('graph_replay_ok')}/{r.get('piecewise_replay_ok')}"
        print(f"{r['model']:<6} {r['batch_size']:>3} {num(r.get('eager_us')):>10} {num(g):>9} {num(p):>10} "
              f"{num(p / g if g and p else None, '.3f'):>8} {ok:>10}")
if "fullrange" in docs:
    rows = sorted(docs["fullrange"]["rows"], key=lambda r: r["batch_size"])
    g = [r["graph_us"] for r in rows if r.get("graph_us")]
    if g:
        print(f"\nC(ii)  FULL graph at {len(g)} sizes {rows[0]['batch_size']}..{rows[-1]['batch_size']}: "
              f"{g[0]:,.1f} .. {g[-1]:,.1f} us (min {min(g):,.1f}, max {max(g):,.1f}); "
              f"replays ok: {sum(1 for r in rows if r.get('graph_replay_ok'))}/{len(rows)}")
if "serving" in docs:
    print("\nC(iii)  serving (48 steps; unprofiled)")
    print(f"{'model':<6} {'list':<6} {'tokens/s':>9} {'fallbacks':<14} {'uncaptured':<12} {'padded rows':>11} "
          f"{'capture s':>9} {'device MiB':>10}")
    for e in docs["serving"].get("serving") or []:
        print(f"{e['model']:<6} {e['list_name'][:6]:<6} {e['throughput_tokens_per_s']:>9,.0f} "
              f"{str(e['fallback_steps']):<14} {str(e['uncaptured_steps']):<12} {e['padded_rows']:>11} "
              f"{num(e['capture_s'], '.2f'):>9} {num(e['device_used_mib']):>10}")
if "memory" in docs:
    print("\nD  graph memory (one shared pool, largest first)")
    print(f"{'model':<6} {'mode':<9} {'list':<13} {'graphs':>6} {'device MiB':>10} {'reserved MiB':>12} "
          f"{'capture s':>9} {'nodes@max':>9}")
    for e in docs["memory"].get("graph_memory") or []:
        top = str(max(e["capture_sizes"]))
        print(f"{e['model']:<6} {e['mode']:<9} {e['list_name'][:13]:<13} {e['graphs']:>6} "
              f"{num(e['device_used_mib']):>10} {num(e['reserved_mib']):>12} {e['capture_s']:>9.2f} "
              f"{num(e['nodes_per_graph'].get(top), 'd'):>9}")
    notes = docs["memory"].get("graph_memory_method") or {}
    for k in ("piecewise_outputs", "nodes_fallback", "replay_mismatch"):
        if k in notes:
            print(f"  {k}: {notes[k]}")
if not docs:
    print("no timings recorded")
PY
say "session: $(($(date +%s) - T0)) s; outputs in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
rm -rf "$WORK"
