#!/bin/bash
# Issue 31 on one GPU: `record --hf-config` for four transformers architectures (configs written from
# public model cards' dimensions under traces/h200-hf-2026-12-02/configs/), eager and compiled, FULL
# graphs, graph memory of two capture lists, a 1..128 FULL-graph range (the README's run), and the
# independent check (notes/hf_independent_check.py). Each part is time-boxed and skipped when the
# budget (BUDGET_S, default 540 s) runs out; whatever ran is packed into OUT/results.tar.gz.
#
#   bash bench/gpu_hf.sh OUT PART      PART 1: the non-compiled sweeps, the compiled 1..128 run, the
#                                      eager/graph independent check; PART 2: the compiled sweeps,
#                                      the non-compiled 1..128 run, the compiled independent check.
#   bash bench/gpu_hf.sh OUT PART --dry-run    print the commands only
#   ONLY=REGEX bash bench/gpu_hf.sh OUT PART   run only the parts whose names match (a part per call)
set -u
OUT=$1
PART=${2:-1}
DRY=${3:-}
BUDGET_S=${BUDGET_S:-540}
C=traces/h200-hf-2026-12-02/configs
W=${WORK:-/tmp/hfrun}
mkdir -p "$W" "$OUT"
T0=$(date +%s)
H="python3 -m analyzer.harness"
SIZES=1,2,3,4,5,8,12,16,24,32,48,64,100,128
MOE_SIZES=1,2,4,8,16,32,64,128
SWEEP="--repeats 30 --rounds 2 --warmup 5 --steps 3 --trace-batch-sizes 8,64"
MEM="--capture-lists pow2-128,all-1-32 --memory-modes full"

. "$(dirname "$0")/gpu_parts.sh"  # part, finish, the versions
if [ "$PART" = 1 ]; then
    part smoke 60 $H --hf-config $C/llama-3.2-1b-like.json --name smoke --modes eager,graph --batch-sizes 8 \
        --repeats 5 --no-trace --no-kernel-count --no-micro --out "$W/smoke"
    for m in llama-3.2-1b-like qwen2.5-3b-like; do
        part "$m" 150 $H --hf-config $C/$m.json --batch-sizes $SIZES $SWEEP $MEM --out "$W/sweep"
    done
    part readme-compiled-1..128 220 $H --hf-config $C/llama-3.2-1b-like.json --compile --modes eager,graph \
        --batch-sizes 1..128 --trace-batch-sizes 8,64 --repeats 20 --no-kernel-count --out "$W/fullrange"
    part independent 90 python3 notes/hf_independent_check.py "$W/independent.json" \
        $C/llama-3.2-1b-like.json $C/qwen2.5-3b-like.json --sizes 1,8,64,128
    part gemma-2-2b-like 120 $H --hf-config $C/gemma-2-2b-like.json --batch-sizes $SIZES $SWEEP $MEM --out "$W/sweep"
    part olmoe-1b-7b-like 100 $H --hf-config $C/olmoe-1b-7b-like.json --batch-sizes $MOE_SIZES $SWEEP $MEM \
        --out "$W/sweep"
else
    for m in llama-3.2-1b-like qwen2.5-3b-like gemma-2-2b-like; do
        part "$m-compiled" 170 $H --hf-config $C/$m.json --compile --batch-sizes $SIZES $SWEEP $MEM --out "$W/sweep"
    done
    part olmoe-1b-7b-like-compiled 260 $H --hf-config $C/olmoe-1b-7b-like.json --compile --batch-sizes $MOE_SIZES \
        $SWEEP $MEM --out "$W/sweep"
    part fullrange-eager-graph 120 $H --hf-config $C/llama-3.2-1b-like.json --modes graph --batch-sizes 1..128 \
        --trace-batch-sizes 8,64 --repeats 20 --no-kernel-count --out "$W/fullrange"
    part independent-compiled 150 python3 notes/hf_independent_check.py "$W/independent_compiled.json" \
        $C/llama-3.2-1b-like.json --sizes 1 --compiled-sizes 8,64
fi
echo "=== done after $(($(date +%s) - T0)) s"
