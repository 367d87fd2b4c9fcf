#!/usr/bin/env bash
# Device call 2 (eleventh session): compute-sanitizer's raw log for a misaligned float4 load, then the batch check
# (10 submissions, --per-gpu 2 on one H200) with single grades of four of them to compare scores.
export PYTHONUNBUFFERED=1
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s); timeout "$lim" "$@" > "$OUT/$name.log" 2>&1; echo "== $name rc=$? $(( $(date +%s) - t0 )) s"; }
step sanlog 60 python3 lab/sanitizer_log.py tests/cuda_cpu/misaligned_float4 --shape 3 2002
grep -E "LINE|CATEGORY|Invalid|Address|misaligned|bounds" "$OUT/sanlog.log" | head -12
step batch 500 python3 scripts/batch_gpu_check.py --out /tmp/bc --phase all --single staff,correct_cuda_pairs,broken_swapped_halves,exploit_gpu_side_stream
grep -vE "^\s*$" "$OUT/batch.log" | grep -E "batch:|single|same|DIFFERENT|missing|GPU|per GPU-hour|identical|differ|throughput|graded" | head -40
cp /tmp/bc/batch/batch_summary.json "$OUT/" 2>/dev/null
python3 - <<'P'
import json, glob
for f in sorted(glob.glob('/tmp/bc/batch/*/results.json')):
    r = json.load(open(f)); e = r.get('extra_data', {})
    print(f.split('/')[-2], r.get('score'), 'phases', e.get('phases_s'), 'slot', (e.get('graded_on') or {}).get('slot'))
P
