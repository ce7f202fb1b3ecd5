#!/bin/bash
# Issue 26's held-out recordings on one GPU (2026-12-03): FULL-graph traces at three sizes and unprofiled truth at
# every size of SIZES for five transformers architectures the cost model was never looked at on (configs written
# from public model cards under traces/h200-heldout-2026-12-03/configs/), and a piecewise serving trace with the
# FULL-graph truth of the same sequence (the "serving median" of piecewise -> FULL). Each part is time-boxed and
# skipped when the budget (BUDGET_S, default 540 s) runs out; whatever ran is packed into OUT/results.tar.gz.
#
#   bash bench/gpu_heldout.sh OUT PART          PART 1: the dense configs; PART 2: the MoE configs and serving;
#                                               PART 3: the final check's configs (traces/h200-final-2026-12-03)
#                                               PART 4: the second fresh set's configs (traces/h200-fresh-2026-12-03b)
#                                               PART 5: the third fresh set's configs (traces/h200-fresh-2026-12-03c)
#                                               PART 6: padding held out: serving traces with a real capture list and
#                                               the FULL-graph truth at every size 1..64 (8b decoder, qwen2.5-0.5b)
#                                               PART 7: the fourth fresh set's configs (traces/h200-fresh-2026-12-03d)
#                                               PART 8: padding held out on two more models (smollm2-1.7b-like,
#                                               stablelm-2-1.6b-like): serving trace plus FULL-graph truth 1..64
#                                               PART 9: the step's jump past a multiple of 8 rows: FULL-graph traces
#                                               and timings at 16, 17, 20, 24 (stablelm-2-1.6b, smollm2-1.7b, 8b)
#                                               PART 10: padding held out on three more models (qwen2.5-1.5b-like,
#                                               granite-3.1-2b-like, phi-2-like; traces/h200-fresh-2026-12-03e/configs)
#                                               PART 11: the fifth fresh set's sweeps (llama-3.2-3b-like,
#                                               aya-expanse-8b-like, granite-3.0-3b-a800m-like)
#                                               PART 12: padding held out on two mixtures of experts
#                                               (granite-3.0-3b-a800m-like, olmoe-1b-7b-like)
#                                               PART 13: piecewise -> FULL on transformers models (qwen3-1.7b-like,
#                                               gemma-3-1b-like; traces/h200-piecewise-2026-12-03/configs):
#                                               piecewise and FULL sweeps at 4, 16, 48, a piecewise serving trace and
#                                               the same sequence's FULL-graph truth
#                                               PART 14 / 15: a sixth fresh set (traces/h200-fresh-2026-12-03f:
#                                               qwen3-0.6b-like, olmo-2-1b-like, falcon3-1b-like): FULL sweeps / piecewise
#                                               PART 16: a seventh fresh set (traces/h200-fresh-2026-12-04: yi-1.5-6b-like,
#                                               qwen2.5-14b-16layer-like, granite-3.1-8b-like): FULL sweeps
#                                               PART 17: long context (traces/h200-longctx-2026-12-04): three earlier
#                                               sets' configs with a 4,096-position KV cache from position 2,048
#                                               (every other part: 512 from 128): FULL sweeps
#                                               PART 18: long context, fresh (traces/h200-longctx-2026-12-04b): three
#                                               other configs at 2,048 or 8,192 positions, from the middle: FULL sweeps
#                                               PART 19: long context, the final check (traces/h200-longctx-2026-12-04c):
#                                               three more configs at 2,048 or 3,072 positions: FULL sweeps
#                                               PART 20 / 21: attention libraries: three earlier sets' configs
#                                               (llama-3.2-3b-like, qwen2.5-0.5b-like, mistral-7b-like) with PyTorch's
#                                               CUTLASS memory-efficient SDPA kernel (20) and its math backend, batched
#                                               matmuls and softmax (21), in place of cuDNN's: FULL sweeps
#                                               (traces/h200-attn-2026-12-05)
#                                               PART 22 / 23: attention written as matmuls, held out (after the
#                                               rule of commit "attention written as matmuls"): transformers' eager
#                                               attention (22: olmo-2-1b-like, qwen3-0.6b-like,
#                                               granite-3.0-1b-a400m-like) and the math backend (23: gemma-3-1b-like,
#                                               qwen3-0.6b-like, falcon3-1b-like): FULL sweeps
#                                               PART 24: another GPU: qwen2.5-0.5b-like, granite-3.0-1b-a400m-like,
#                                               smollm2-1.7b-like, phi-3-mini-like (configs of earlier H200 sets, cuDNN
#                                               attention) on an H100: FULL sweeps (traces/h100-2026-12-05)
#                                               PART 25: another GPU: padding (qwen2.5-0.5b-like, as part 6) and
#                                               piecewise -> FULL (smollm2-1.7b-like, as part 13 without its GPU
#                                               test) on an H100 (traces/h100-padding-2026-12-05,
#                                               traces/h100-piecewise-2026-12-05)
#                                               PART 27: the same on two more models (phi-2-like padding, seed 29;
#                                               qwen3-0.6b-like piecewise) on an H100
#                                               PART 28 / 29: padding held out, fresh (after the whole-wave share
#                                               fitted on the trace): falcon3-1b-like, olmo-2-1b-like,
#                                               llama-3.2-3b-like on an H100 (28, seed 31); qwen3-0.6b-like,
#                                               gemma-3-1b-like on an H200 (29, seed 37; it came as an H100)
#                                               PART 30: the same on an H200 for certain (the call passes needs_h200):
#                                               olmo-2-1b-like, llama-3.2-3b-like (seed 41)
#                                               PART 31: another GPU, fresh, after the latency-bound attention rule
#                                               (commit 2ce6ab6): FULL sweeps on an H100 of four configs no H100 has
#                                               run (falcon3-1b-like, qwen3-0.6b-like, phi-4-mini-like,
#                                               qwen2.5-7b-like): the curve from one row, checked once
#                                               PART 32: piecewise -> FULL on an H100, fresh, after the staging copies
#                                               left out (commit 9f865b2): olmo-2-1b-like, falcon3-1b-like,
#                                               gemma-3-1b-like at 4, 16, 48 rows, checked once
#                                               PART 33: an eighth fresh set (traces/h200-fresh-2026-12-05c:
#                                               smollm2-360m-like, tinyllama-1.1b-like, qwen3-8b-like): FULL sweeps with
#                                               eager truth, after the GPU-bound eager end (EAGER_GAP_OVER_NODE_US)
#                                               PART 34: another GPU, fresh (recorded 2026-12-06 by this command
#                                               line inline): llama-3.2-3b-like, qwen2.5-1.5b-like, granite-3.1-2b-like
#                                               (traces/h200-fresh-2026-12-03e/configs) on an H100: FULL sweeps with
#                                               eager truth (traces/h100-2026-12-06b)
#                                               PART 26: another GPU, fresh (after commit 3641ea4's band end):
#                                               qwen3-4b-like, llama-3.1-8b-like, olmo-2-1b-like, stablelm-2-1.6b-like
#                                               on an H100: FULL sweeps (traces/h100-2026-12-05b)
#   The repository (traces/ alone is over 200 MB) is larger than the 64 MiB a device call sends: send it with traces/
#   out of the index and carry the configs the part reads (`git rm -r -q --cached traces; echo /traces/ >>
#   .git/info/exclude`, then `carry` e.g. traces/h200-heldout-2026-12-03/configs), and put it back afterwards
#   (`git reset -q -- traces`, the exclude line removed) before committing anything.
#   bash bench/gpu_heldout.sh OUT PART --dry-run
#   ONLY=REGEX bash bench/gpu_heldout.sh OUT PART
set -u
OUT=$1
PART=${2:-1}
DRY=${3:-}
BUDGET_S=${BUDGET_S:-540}
C=traces/h200-heldout-2026-12-03/configs
W=${WORK:-/tmp/heldout}
mkdir -p "$W" "$OUT"
T0=$(date +%s)
H="python3 -m analyzer.harness"
SIZES=1,2,3,4,5,8,12,16,24,32,48,64,100,128
SWEEP="--repeats 30 --rounds 2 --warmup 5 --steps 3 --trace-batch-sizes 1,8,64 --no-micro"
SERVE="--capture-sizes serve=1,2,4,8,16,24,32,40,48,56,64 --distribution bench/serving_distribution.json --serving-steps 40
       --inject-fallbacks 4 --repeats 20 --warmup 3 --serving-rounds 3 --seed 3 --no-micro"

LOG_TAIL=18
. "$(dirname "$0")/gpu_parts.sh"  # part, finish, the versions
sweep_set() {  # sweep_set CONFIG_DIR SUBFOLDER LIMIT_S MODEL...: each config's FULL-graph sweep, packed as SUBFOLDER.tar.gz
    local dir=$1 lim=$3 m
    SET=$2
    shift 3
    for m in "$@"; do
        part "$m" "$lim" $H --hf-config "$dir/$m.json" --batch-sizes $SIZES $SWEEP --out "$W/$SET"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/$SET.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) "$SET/timings.json" \
        $(cd "$W" && ls "$SET"/*_graph.json.gz) && ls -la "$OUT"; }
}
piecewise_set() {  # piecewise_set CONFIG_DIR MODEL...: piecewise and FULL graphs of each config, packed as piecewise.tar.gz
    local P=$1 m
    shift
    # Fixed batch: unprofiled piecewise and FULL-graph step per size (the truth) and 3-step traces of both modes.
    local PW="--modes piecewise,graph --batch-sizes 4,16,48 --repeats 30 --rounds 2 --warmup 5 --steps 3 --no-micro"
    # Serving: one seeded sequence replayed on piecewise graphs (traced), then on FULL graphs (its per-bucket replay
    # times are the truth); 24 steps keep the trace under 5 MB (the 8b decoder's 40 piecewise steps were 5.6 MB).
    local PSERVE="--capture-sizes serve=1,2,4,8,16,24,32,40,48,56,64 --distribution bench/serving_distribution.json
            --serving-steps 24 --inject-fallbacks 3 --repeats 20 --warmup 3 --serving-rounds 3 --seed 19 --no-micro"
    # First the GPU test of a transformers capture list replaying like eager (FULL and piecewise): seconds. The
    # package is not installed on the device (the harness runs as analyzer.harness): the tests import it as
    # launchgap through a link (on 2026-12-03 without it they failed to import and tested nothing).
    mkdir -p "$W/shim" && ln -sfn "$PWD/analyzer" "$W/shim/launchgap"
    part gpu-test-hf 45 env PYTHONPATH="$W/shim:$PWD" python3 -m pytest -q -p no:cacheprovider \
        tests/integration/test_harness_gpu.py -k transformers
    for m in "$@"; do
        part "piecewise-$m" 80 $H --hf-config $P/$m.json $PW --out "$W/pw/$m/sweep"
        part "serving-piecewise-$m" 100 $H --hf-config $P/$m.json $PSERVE --serving-graphs piecewise \
            --out "$W/pw/$m/serving_piecewise"
        part "serving-full-$m" 60 $H --hf-config $P/$m.json $PSERVE --serving-graphs full --no-trace \
            --out "$W/pw/$m/serving_full"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/piecewise.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) pw && ls -la "$OUT"; }
}
if [ "$PART" = 1 ]; then
    for m in qwen3-4b-like phi-3-mini-like mistral-7b-like; do
        part "$m" 180 $H --hf-config $C/$m.json --batch-sizes $SIZES $SWEEP --out "$W/sweep"
    done
elif [ "$PART" = 3 ]; then  # a fresh held-out set for the final check (configs in traces/h200-final-2026-12-03)
    sweep_set traces/h200-final-2026-12-03/configs final 150 llama-3.1-8b-like qwen2.5-7b-like gemma-2-9b-like \
        granite-3.0-1b-a400m-like
elif [ "$PART" = 4 ]; then  # a second fresh set (configs in traces/h200-fresh-2026-12-03b), kept off the model's work
    sweep_set traces/h200-fresh-2026-12-03b/configs fresh 130 qwen3-30b-a3b-24layer-like deepseek-v2-lite-like \
        mistral-nemo-12b-like smollm2-1.7b-like qwen2.5-0.5b-like
elif [ "$PART" = 5 ]; then  # a third fresh set (configs in traces/h200-fresh-2026-12-03c), kept off the model's work
    sweep_set traces/h200-fresh-2026-12-03c/configs fresh3 125 moonlight-16b-a3b-like qwen2-57b-a14b-8layer-like \
        gemma-3-4b-like phi-4-mini-like olmo-2-7b-like
elif [ "$PART" = 7 ]; then  # a fourth fresh set (configs in traces/h200-fresh-2026-12-03d), kept off the model's work
    sweep_set traces/h200-fresh-2026-12-03d/configs fresh4 105 stablelm-2-1.6b-like nemotron-mini-4b-like \
        starcoder2-3b-like glm-4-9b-like ernie-4.5-21b-a3b-12layer-like
elif [ "$PART" = 11 ]; then  # a fifth fresh set (configs in traces/h200-fresh-2026-12-03e), kept off the model's work
    sweep_set traces/h200-fresh-2026-12-03e/configs fresh5 150 llama-3.2-3b-like aya-expanse-8b-like \
        granite-3.0-3b-a800m-like
elif [ "$PART" -ge 20 ] && [ "$PART" -le 23 ]; then  # attention libraries other than cuDNN's
    case $PART in
        20|21) CONFIGS="traces/h200-fresh-2026-12-03e/configs/llama-3.2-3b-like.json
                        traces/h200-fresh-2026-12-03b/configs/qwen2.5-0.5b-like.json
                        traces/h200-heldout-2026-12-03/configs/mistral-7b-like.json" ;;
        22) CONFIGS="traces/h200-fresh-2026-12-03f/configs/olmo-2-1b-like.json
                     traces/h200-fresh-2026-12-03f/configs/qwen3-0.6b-like.json
                     traces/h200-final-2026-12-03/configs/granite-3.0-1b-a400m-like.json" ;;
        23) CONFIGS="traces/h200-piecewise-2026-12-03/configs/gemma-3-1b-like.json
                     traces/h200-fresh-2026-12-03f/configs/qwen3-0.6b-like.json
                     traces/h200-fresh-2026-12-03f/configs/falcon3-1b-like.json" ;;
    esac
    BACKEND=$(case $PART in 20) echo efficient;; 21|23) echo math;; 22) echo eager;; esac)
    SET=attn-$BACKEND$([ "$PART" -ge 22 ] && echo -heldout)
    for c in $CONFIGS; do
        part "$(basename "$c" .json)-$BACKEND" 170 $H --hf-config "$c" --attention-backend $BACKEND \
            --batch-sizes $SIZES $SWEEP --out "$W/$SET"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/$SET.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) "$SET/timings.json" \
        $(cd "$W" && ls "$SET"/*_graph.json.gz) && ls -la "$OUT"; }
elif [ "$PART" = 6 ] || [ "$PART" = 8 ] || [ "$PART" = 10 ] || [ "$PART" = 12 ] || [ "$PART" = 25 ] || [ "$PART" = 27 ] \
        || [ "$PART" = 28 ] || [ "$PART" = 29 ] || [ "$PART" = 30 ]; then  # padding cost from a serving trace alone, held out
    Q=traces/h200-fresh-2026-12-03b/configs/qwen2.5-0.5b-like.json
    PAD="--capture-sizes serve=1,2,4,8,16,24,32,48,64 --distribution bench/serving_distribution.json --serving-steps 40
         --inject-fallbacks 4 --repeats 20 --warmup 3 --serving-rounds 3 --seed 5 --no-micro"
    FULL="--batch-sizes 1..64 --modes graph --repeats 20 --rounds 2 --warmup 3 --no-trace --no-micro"
fi
if [ "$PART" = 8 ]; then  # two more models for the padding check, another seed (traces/h200-padding-2026-12-03b)
    S=traces/h200-fresh-2026-12-03b/configs/smollm2-1.7b-like.json
    L=traces/h200-fresh-2026-12-03d/configs/stablelm-2-1.6b-like.json
    PAD=${PAD/--seed 5/--seed 7}
    part serving-smollm2 100 $H --hf-config $S $PAD --out "$W/pad/servings"
    part fullrange-smollm2 100 $H --hf-config $S $FULL --out "$W/pad/fullranges"
    part serving-stablelm 100 $H --hf-config $L $PAD --out "$W/pad/servingl"
    part fullrange-stablelm 100 $H --hf-config $L $FULL --out "$W/pad/fullrangel"
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/pad.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) pad && ls -la "$OUT"; }
elif [ "$PART" = 10 ]; then  # three more models for the padding check, another seed (traces/h200-padding-2026-12-03c)
    E=traces/h200-fresh-2026-12-03e/configs
    PAD=${PAD/--seed 5/--seed 11}
    for m in qwen2.5-1.5b-like granite-3.1-2b-like phi-2-like; do
        part "serving-$m" 100 $H --hf-config $E/$m.json $PAD --out "$W/pad/serving-$m"
        part "fullrange-$m" 110 $H --hf-config $E/$m.json $FULL --out "$W/pad/fullrange-$m"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/pad.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) pad && ls -la "$OUT"; }
elif [ "$PART" = 24 ]; then  # another GPU: four earlier sets' configs (cuDNN attention) on an H100 (nvidia-h100-x1)
    for c in traces/h200-fresh-2026-12-03b/configs/qwen2.5-0.5b-like.json \
             traces/h200-final-2026-12-03/configs/granite-3.0-1b-a400m-like.json \
             traces/h200-fresh-2026-12-03b/configs/smollm2-1.7b-like.json \
             traces/h200-heldout-2026-12-03/configs/phi-3-mini-like.json; do
        part "$(basename "$c" .json)" "${PART_LIMIT_S:-130}" $H --hf-config "$c" --batch-sizes $SIZES $SWEEP --out "$W/h100"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/h100.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) h100/timings.json \
        $(cd "$W" && ls h100/*_graph.json.gz) && ls -la "$OUT"; }
elif [ "$PART" = 26 ]; then  # another GPU, fresh: four more earlier configs on an H100, after the bandwidth band end
    for c in traces/h200-heldout-2026-12-03/configs/qwen3-4b-like.json \
             traces/h200-final-2026-12-03/configs/llama-3.1-8b-like.json \
             traces/h200-fresh-2026-12-03f/configs/olmo-2-1b-like.json \
             traces/h200-fresh-2026-12-03d/configs/stablelm-2-1.6b-like.json; do
        part "$(basename "$c" .json)" "${PART_LIMIT_S:-125}" $H --hf-config "$c" --batch-sizes $SIZES $SWEEP --out "$W/h100b"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/h100b.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) h100b/timings.json \
        $(cd "$W" && ls h100b/*_graph.json.gz) && ls -la "$OUT"; }
elif [ "$PART" = 31 ]; then  # another GPU, fresh, after the latency-bound attention rule (nvidia-h100-x1)
    for c in traces/h200-fresh-2026-12-03f/configs/falcon3-1b-like.json \
             traces/h200-fresh-2026-12-03f/configs/qwen3-0.6b-like.json \
             traces/h200-fresh-2026-12-03c/configs/phi-4-mini-like.json \
             traces/h200-final-2026-12-03/configs/qwen2.5-7b-like.json; do
        part "$(basename "$c" .json)" "${PART_LIMIT_S:-125}" $H --hf-config "$c" --batch-sizes $SIZES $SWEEP --out "$W/h100c"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/h100c.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) h100c/timings.json \
        $(cd "$W" && ls h100c/*_graph.json.gz) && ls -la "$OUT"; }
elif [ "$PART" = 32 ]; then  # piecewise -> FULL on an H100, fresh, after the staging copies left out (nvidia-h100-x1)
    PW="--modes piecewise,graph --batch-sizes 4,16,48 --repeats 30 --rounds 2 --warmup 5 --steps 3 --no-micro"
    # PW_CONFIGS: other configs (on an H200 the three above are not fresh: parts 13 and 15 ran them there).
    for c in ${PW_CONFIGS:-traces/h200-fresh-2026-12-03f/configs/olmo-2-1b-like.json
             traces/h200-fresh-2026-12-03f/configs/falcon3-1b-like.json
             traces/h200-piecewise-2026-12-03/configs/gemma-3-1b-like.json}; do
        m=$(basename "$c" .json)
        part "sweep-$m" "${PART_LIMIT_S:-150}" $H --hf-config "$c" $PW --out "$W/pw/$m/sweep"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/pw.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) pw && ls -la "$OUT"; }
elif [ "$PART" = 25 ] || [ "$PART" = 27 ]; then  # another GPU: padding and piecewise -> FULL on an H100, as 6 and 13
    Q=traces/h200-fresh-2026-12-03b/configs/qwen2.5-0.5b-like.json
    M=traces/h200-fresh-2026-12-03b/configs/smollm2-1.7b-like.json
    PAD=${PAD/--seed 5/--seed 23}
    if [ "$PART" = 27 ]; then  # two more models, another seed
        Q=traces/h200-fresh-2026-12-03e/configs/phi-2-like.json
        M=traces/h200-fresh-2026-12-03f/configs/qwen3-0.6b-like.json
        PAD=${PAD/--seed 23/--seed 29}
    fi
    q=$(basename "$Q" .json) m=$(basename "$M" .json)
    part "serving-$q" 150 $H --hf-config $Q $PAD --out "$W/pad/serving-$q"
    part "fullrange-$q" 150 $H --hf-config $Q $FULL --out "$W/pad/fullrange-$q"
    PW="--modes piecewise,graph --batch-sizes 4,16,48 --repeats 30 --rounds 2 --warmup 5 --steps 3 --no-micro"
    PSERVE="--capture-sizes serve=1,2,4,8,16,24,32,40,48,56,64 --distribution bench/serving_distribution.json
            --serving-steps 24 --inject-fallbacks 3 --repeats 20 --warmup 3 --serving-rounds 3 --seed 19 --no-micro"
    part "sweep-$m" 120 $H --hf-config $M $PW --out "$W/pw/$m/sweep"
    part "serving-piecewise-$m" 150 $H --hf-config $M $PSERVE --serving-graphs piecewise --out "$W/pw/$m/serving_piecewise"
    part "serving-full-$m" 100 $H --hf-config $M $PSERVE --serving-graphs full --no-trace --out "$W/pw/$m/serving_full"
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/h100b.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) pad pw && ls -la "$OUT"; }
elif [ "$PART" = 28 ] || [ "$PART" = 29 ] || [ "$PART" = 30 ]; then  # padding held out, fresh, after the fitted share
    if [ "$PART" = 28 ]; then  # on an H100 (nvidia-h100-x1)
        PAD=${PAD/--seed 5/--seed 31}
        CONFIGS="traces/h200-fresh-2026-12-03f/configs/falcon3-1b-like.json traces/h200-fresh-2026-12-03f/configs/olmo-2-1b-like.json
                 traces/h200-fresh-2026-12-03e/configs/llama-3.2-3b-like.json"
    elif [ "$PART" = 30 ]; then  # on an H200 (needs_h200)
        PAD=${PAD/--seed 5/--seed 41}
        CONFIGS="traces/h200-fresh-2026-12-03f/configs/olmo-2-1b-like.json traces/h200-fresh-2026-12-03e/configs/llama-3.2-3b-like.json"
    else  # on an H200 (it came as an H100)
        PAD=${PAD/--seed 5/--seed 37}
        CONFIGS="traces/h200-fresh-2026-12-03f/configs/qwen3-0.6b-like.json traces/h200-piecewise-2026-12-03/configs/gemma-3-1b-like.json"
    fi
    for c in $CONFIGS; do
        m=$(basename "$c" .json)
        part "serving-$m" 120 $H --hf-config "$c" $PAD --out "$W/pad/serving-$m"
        part "fullrange-$m" 150 $H --hf-config "$c" $FULL --out "$W/pad/fullrange-$m"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/pad.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) pad && ls -la "$OUT"; }
elif [ "$PART" = 12 ]; then  # two mixtures of experts for the padding check (traces/h200-padding-2026-12-03d)
    PAD=${PAD/--seed 5/--seed 17}
    for c in traces/h200-fresh-2026-12-03e/configs/granite-3.0-3b-a800m-like.json \
             traces/h200-hf-2026-12-02/configs/olmoe-1b-7b-like.json; do
        m=$(basename "$c" .json)
        part "serving-$m" 120 $H --hf-config "$c" $PAD --out "$W/pad/serving-$m"
        part "fullrange-$m" 150 $H --hf-config "$c" $FULL --out "$W/pad/fullrange-$m"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/pad.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) pad && ls -la "$OUT"; }
elif [ "$PART" = 6 ]; then  # padding cost from a serving trace alone, held out (traces/h200-padding-2026-12-03)
    part serving-8b 120 $H --model 8b $PAD --out "$W/pad/serving8b"
    part fullrange-8b 120 $H --model 8b $FULL --out "$W/pad/fullrange8b"
    part serving-qwen0.5b 100 $H --hf-config $Q $PAD --out "$W/pad/servingq"
    part fullrange-qwen0.5b 100 $H --hf-config $Q $FULL --out "$W/pad/fullrangeq"
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/pad.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) pad && ls -la "$OUT"; }
elif [ "$PART" = 9 ]; then  # which kernels make a FULL-graph step jump one row past a multiple of 8
    J="--batch-sizes 16,17,20,24 --trace-batch-sizes 16,17,20,24 --modes graph --repeats 30 --rounds 2 --warmup 5
       --steps 3 --no-micro"
    part jump-stablelm 90 $H --hf-config traces/h200-fresh-2026-12-03d/configs/stablelm-2-1.6b-like.json $J --out "$W/jump"
    part jump-smollm2 90 $H --hf-config traces/h200-fresh-2026-12-03b/configs/smollm2-1.7b-like.json $J --out "$W/jump"
    part jump-8b 90 $H --model 8b $J --out "$W/jump"
elif [ "$PART" = 13 ]; then  # piecewise -> FULL on transformers models (traces/h200-piecewise-2026-12-03/configs)
    piecewise_set traces/h200-piecewise-2026-12-03/configs qwen3-1.7b-like gemma-3-1b-like
elif [ "$PART" = 14 ]; then  # a sixth fresh set's sweeps (configs in traces/h200-fresh-2026-12-03f), checked once
    sweep_set traces/h200-fresh-2026-12-03f/configs fresh6 150 qwen3-0.6b-like olmo-2-1b-like falcon3-1b-like
elif [ "$PART" = 33 ]; then  # an eighth fresh set's sweeps, checked once (the GPU-bound eager end held out)
    sweep_set traces/h200-fresh-2026-12-05c/configs fresh8 160 smollm2-360m-like tinyllama-1.1b-like qwen3-8b-like
elif [ "$PART" = 34 ]; then  # another GPU, fresh: three configs no H100 had run, FULL sweeps with eager truth
    sweep_set traces/h200-fresh-2026-12-03e/configs h100d 130 llama-3.2-3b-like qwen2.5-1.5b-like granite-3.1-2b-like
elif [ "$PART" = 16 ]; then  # a seventh fresh set's sweeps (configs in traces/h200-fresh-2026-12-04), checked once
    sweep_set traces/h200-fresh-2026-12-04/configs fresh7 170 yi-1.5-6b-like qwen2.5-14b-16layer-like granite-3.1-8b-like
elif [ "$PART" = 17 ]; then  # long context: attention's share of the step and its growth per row, checked once
    SWEEP="$SWEEP --context-len 4096 --start-pos 2048"
    sweep_set traces/h200-longctx-2026-12-04/configs longctx 170 qwen2.5-0.5b-like llama-3.2-3b-like phi-4-mini-like
elif [ "$PART" = 18 ]; then  # long context, fresh: other models and lengths, checked once after part 17's change
    G=traces/h200-longctx-2026-12-04b/configs
    part mistral-7b-like-2048 170 $H --hf-config $G/mistral-7b-like.json --batch-sizes $SIZES $SWEEP \
        --context-len 2048 --start-pos 1024 --out "$W/longctx2/mistral-7b-like-2048"
    part qwen2.5-1.5b-like-8192 170 $H --hf-config $G/qwen2.5-1.5b-like.json --batch-sizes $SIZES $SWEEP \
        --context-len 8192 --start-pos 4096 --out "$W/longctx2/qwen2.5-1.5b-like-8192"
    part olmo-2-1b-like-2048 170 $H --hf-config $G/olmo-2-1b-like.json --batch-sizes $SIZES $SWEEP \
        --context-len 2048 --start-pos 1024 --out "$W/longctx2/olmo-2-1b-like-2048"
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/longctx2.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) longctx2 && ls -la "$OUT"; }
elif [ "$PART" = 19 ]; then  # long context, the split rule's final form checked once (commit c9c1861)
    G=traces/h200-longctx-2026-12-04c/configs
    for mc in qwen3-4b-like:3072 smollm2-1.7b-like:2048 granite-3.1-8b-like:2048; do
        m=${mc%%:*} c=${mc##*:}
        part "$m-$c" "${PART_LIMIT_S:-170}" $H --hf-config "$G/$m.json" --batch-sizes $SIZES $SWEEP --context-len "$c" \
            --start-pos $((c / 2)) --out "$W/longctx3/$m-$c"
    done
    finish() { [ -z "$DRY" ] && tar -czf "$OUT/longctx3.tar.gz" -C "$W" $(cd "$W" && ls log_*.txt) longctx3 && ls -la "$OUT"; }
elif [ "$PART" = 15 ]; then  # the sixth fresh set's models piecewise -> FULL, checked once
    piecewise_set traces/h200-fresh-2026-12-03f/configs qwen3-0.6b-like olmo-2-1b-like falcon3-1b-like
elif [ "$PART" = 2 ]; then
    for m in qwen1.5-moe-a2.7b-like mixtral-8x7b-8layer-like; do
        part "$m" 150 $H --hf-config $C/$m.json --batch-sizes $SIZES $SWEEP --out "$W/sweep"
    done
    part serving-8b-piecewise 110 $H --model 8b $SERVE --serving-graphs piecewise --out "$W/serving_piecewise"
    part serving-8b-full 100 $H --model 8b $SERVE --serving-graphs full --out "$W/serving_full"
fi
echo "=== done after $(($(date +%s) - T0)) s"
