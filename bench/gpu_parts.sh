# Sourced by bench/gpu_hf.sh and bench/gpu_heldout.sh: time-boxed parts of one GPU call, the packing of what ran,
# and the machine's versions. The caller sets OUT, W (work folder), DRY, BUDGET_S and T0 before sourcing.

part() {  # part NAME LIMIT_S COMMAND...: run within the budget, log its wall time
    local name=$1 lim=$2 left
    shift 2
    if [ -n "${ONLY:-}" ] && ! [[ "$name" =~ $ONLY ]]; then echo "=== $name: not asked (ONLY=$ONLY)"; return; fi
    left=$((BUDGET_S - ($(date +%s) - T0)))
    if [ "$left" -lt 25 ]; then echo "=== $name: SKIPPED (budget)"; return; fi
    [ "$lim" -gt "$left" ] && lim=$left
    echo "=== $name (limit ${lim}s, $(date -u +%T))"
    if [ -n "$DRY" ]; then echo "$*"; return; fi
    local s=$(date +%s) rc
    PYTHONUNBUFFERED=1 timeout "$lim" "$@" > "$W/log_$name.txt" 2>&1
    rc=$?
    grep -v "USDT:" "$W/log_$name.txt" | grep -v "^\[" | tail -n "${LOG_TAIL:-14}" | cut -c1-160
    echo "=== $name: rc=$rc wall=$(($(date +%s) - s))s"
}
# Everything under W packed into OUT at exit (a caller may redefine finish to pack less; the trap calls it by name).
finish() { [ -z "$DRY" ] && tar -czf "$OUT/results.tar.gz" -C "$W" . && ls -la "$OUT"; }
trap finish EXIT

[ -z "$DRY" ] && { nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv;
                    python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"; }
