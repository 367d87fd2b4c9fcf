#!/usr/bin/env bash
# One device call: the checks of this session's GPU claims, each with its own time limit, logs under $OUT.
export PYTHONUNBUFFERED=1
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s); timeout "$lim" "$@" > "$OUT/$name.log" 2>&1; echo "== $name rc=$? $(( $(date +%s) - t0 )) s"; }
step staff 150 python3 -m grader grade --staff --out /tmp/v/staff
grep -E "score|wall time" "$OUT/staff.log" | tail -3
python3 - <<'P'
import json; r=json.load(open('/tmp/v/staff/results.json')); print('phases', r['extra_data'].get('phases_s'))
for c,d in r['extra_data']['performance']['cases'].items():
    for n,v in d['impls'].items(): print(c,n,round(v['effective_ms'],4),round(v['pct_roofline'],1),'excess',round(v.get('wall_excess_ms',0),4),'fp',v.get('first_pass',{}).get('retimes'),'credit',v['credit'])
P
grep -E "sanitizer" "$OUT/staff.log" | head -3
step gelu 120 python3 -m grader bench --problem gelu --staff --out /tmp/v/gelu
step swiglu 100 python3 -m grader bench --problem swiglu --staff --out /tmp/v/swiglu
step geglu 100 python3 -m grader bench --problem geglu --staff --out /tmp/v/geglu
step cudacpu 200 python3 -m pytest -q -s -m gpu tests/test_cuda_cpu.py -p no:cacheprovider -k "compute_sanitizer_row or (same_verdicts and (scalar or ignores_row_stride or missing_tail or shared_sync or fp16_bf16))"
grep -E "passed|failed|cpu .* / gpu" "$OUT/cudacpu.log" | cut -c1-300 | tail -12
step exploits 110 python3 -m pytest -q -rA -m gpu tests/test_exploits.py -p no:cacheprovider -k "hidden_under or verify_peek"
grep -E "PASS|FAIL|passed|failed" "$OUT/exploits.log" | tail -4
