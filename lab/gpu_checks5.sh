#!/usr/bin/env bash
# Device call 2 (twelfth session): the batch of 10 again after the warm-up fix, then single grades of as many of
# them as fit (the rest in the next call); results flattened under $OUT/r for the compare here
# (`python3 scripts/batch_gpu_check.py --out D --phase compare` over both calls' files).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s); timeout "$lim" "$@" > "$OUT/$name.log" 2>&1; echo "== $name rc=$? $(( $(date +%s) - t0 )) s"; }
flat() { mkdir -p "$OUT/r/$2"; for f in "$1"/*/results.json; do [ -f "$f" ] && cp "$f" "$OUT/r/$2/$(basename "$(dirname "$f")").json"; done; }
step batch 400 python3 scripts/batch_gpu_check.py --out /tmp/bc --phase batch
grep -v "^\s*$" "$OUT/batch.log" | tail -12 | cut -c1-300
flat /tmp/bc/batch batch; cp /tmp/bc/batch/batch_summary.json "$OUT/r/" 2>/dev/null
python3 lab/timing_breakdown.py /tmp/bc/batch > "$OUT/breakdown.txt" 2>&1
grep -E "score|performance:" "$OUT/breakdown.txt" | cut -c1-250
LEFT=$(( 575 - ($(date +%s) - T0) ))
echo "single phase: $LEFT s left"
step single "$LEFT" python3 scripts/batch_gpu_check.py --out /tmp/bc --phase single --single "${SINGLES:-staff,stubs,correct_rows_2d_grid,broken_swapped_halves,exploit_cache_by_ptr,correct_cuda_pairs,broken_missing_mask,correct_persistent_row_loop,exploit_numpy_compute,exploit_gpu_side_stream}"
cat "$OUT/single.log" | cut -c1-200
flat /tmp/bc/single single
