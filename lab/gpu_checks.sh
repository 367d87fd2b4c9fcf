#!/usr/bin/env bash
# One device call (eleventh session): the GPU checks of this session's changes, each with its own time limit,
# logs under $OUT. Every line of a grade's output is prefixed with seconds since its start (where the time goes).
export PYTHONUNBUFFERED=1
mkdir -p /tmp/v
stamp() { python3 -c 'import sys,time
t0=time.monotonic()
for l in sys.stdin: sys.stdout.write(f"{time.monotonic()-t0:7.2f} {l}"); sys.stdout.flush()'; }
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s); timeout "$lim" "$@" 2>&1 | stamp > "$OUT/$name.log"; echo "== $name rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
perf() { python3 - "$1" <<'P'
import json, sys; r = json.load(open(sys.argv[1])); e = r['extra_data']
print('score', r.get('score'), 'phases', e.get('phases_s'))
for c, d in e.get('performance', {}).get('cases', {}).items():
    print(' ', c, 'base', {n: round(v['effective_ms'], 4) for n, v in d['baselines'].items()})
    for n, v in d['impls'].items():
        print('   ', n, round(v['effective_ms'], 4), f"{v['pct_roofline']:.1f}%", 'credit', v['credit'], 'retimes', (v.get('first_pass') or {}).get('retimes'))
for t in r['tests']:
    if t.get('status') == 'failed': print('  FAILED', t['name'], t['output'][:300].replace('\n', ' | '))
P
}
step staff 160 python3 -m grader grade --staff --out /tmp/v/staff
perf /tmp/v/staff/results.json
step backward 240 python3 -m grader grade --problem glu_backward --staff --out /tmp/v/backward
perf /tmp/v/backward/results.json
step gelu 120 python3 -m grader bench --problem gelu --staff --out /tmp/v/gelu
tail -25 "$OUT/gelu.log"
step profile 90 python3 -m grader profile --staff
tail -30 "$OUT/profile.log" | cut -c1-220
step verdicts 300 python3 lab/cuda_verdicts.py --jobs 8 --out /tmp/v/verdicts
cat "$OUT/verdicts.log" | cut -c1-400
