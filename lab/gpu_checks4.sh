#!/usr/bin/env bash
# Device call 1 (twelfth session): the batch of 10 (issue 19's throughput, after HOPELESS_FACTOR, the sanitizer's
# three workers and no re-timing of a confirmed excess on later cases), where each grade's time went, then gelu's
# Triton variants (issue 20's fp16_8k at 94.2%).
export PYTHONUNBUFFERED=1
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s); timeout "$lim" "$@" > "$OUT/$name.log" 2>&1; echo "== $name rc=$? $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
step batch 470 python3 scripts/batch_gpu_check.py --out "$OUT/bc" --phase batch
grep -v "^\s*$" "$OUT/batch.log" | tail -8 | cut -c1-300
python3 lab/timing_breakdown.py "$OUT/bc/batch" > "$OUT/breakdown.txt" 2>&1; cut -c1-220 "$OUT/breakdown.txt" | head -90
step gelu 100 python3 lab/gelu_variants.py --reps 3
cat "$OUT/gelu.log" | cut -c1-600
