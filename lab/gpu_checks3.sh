#!/usr/bin/env bash
# Device call 3 (eleventh session): every problem's staff grade on the H200 (tests/test_gpu_problems.py), the
# CPU-vs-GPU verdict table again after the sanitizer fixes, and a slow correct design's grade (where its time goes).
export PYTHONUNBUFFERED=1
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s); timeout "$lim" "$@" > "$OUT/$name.log" 2>&1; echo "== $name rc=$? $(( $(date +%s) - t0 )) s"; }
step problems 280 python3 -m pytest -q -s -rA -p no:cacheprovider -m gpu tests/test_gpu_problems.py
grep -E "PASSED|FAILED|passed|failed|Error|%" "$OUT/problems.log" | cut -c1-300 | tail -20
step verdicts 200 python3 lab/cuda_verdicts.py --jobs 8 --out /tmp/v/verdicts
grep -E "^\|" "$OUT/verdicts.log" | cut -c1-330
mkdir -p /tmp/p; cp -r tests/correct/persistent_row_loop /tmp/p/sub
step persistent 100 python3 -m grader grade --submission /tmp/p/sub --only triton --out /tmp/p/out
cp /tmp/p/out/results.json "$OUT/persistent_results.json" 2>/dev/null
python3 - <<'P'
import json; r = json.load(open('/tmp/p/out/results.json')); e = r['extra_data']
print('score', r['score'], 'phases', e.get('phases_s'))
for c, d in e['performance']['cases'].items():
    i = d['impls']['triton']
    print(c, 'wall', d['wall_s'], 'rounds', d['rounds'], 'stop', d['stop'][:80], 'ms', round(i['effective_ms'], 3), 'credit', i['credit'], 'fp', i.get('first_pass'))
P
