#!/bin/bash
# What a kernel change costs in grade time, with the machine held fixed: grades two submission directories
# alternately on this machine (A, B, A, B, ...) and prints each grade's wall time, phase breakdown and per-case
# medians. On a GPU host (the figures are from an H200), from the repository root:
#
#   bash scripts/ab_grade.sh DIR_A DIR_B [ROUNDS=2] [OUT=ab-out]
#
# Backs docs/performance.md "Grade cost" (run 23: the new staff kernels against commit 858e120's, four grades on one
# machine; starting the timing workers took 11.4-12.4 s of every grade). To compare against an older commit's staff
# kernels, from the repository root:
#   mkdir -p ab-old && git show 858e120:reference/glu/solution_triton.py > ab-old/glu_triton.py \
#     && git show 858e120:reference/glu/solution_cuda.cu > ab-old/glu_cuda.cu
set -u
A=$1; B=$2; ROUNDS=${3:-2}; OUT=${4:-ab-out}
mkdir -p "$OUT"
i=0
for r in $(seq 1 "$ROUNDS"); do
  for v in A B; do
    i=$((i + 1)); if [ $v = A ]; then d=$A; else d=$B; fi
    t0=$(date +%s.%N)
    timeout 300 python3 -m grader grade --submission "$d" --out "$OUT/grade$i" > "$OUT/grade$i.log" 2>&1
    rc=$?; t1=$(date +%s.%N)
    echo "grade $i ($v: $d): rc=$rc wall=$(python3 -c "print(round($t1 - $t0, 1))") s"
    grep -E "starting workers|loading workers|measuring copy" "$OUT/grade$i.log"
    python3 - "$OUT/grade$i/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); ed = r["extra_data"]
print("  score", r["score"], "phases", ed["phases_s"])
for n, c in ed.get("performance", {}).get("cases", {}).items():
    meds = {k: v["event"]["median"] for k, v in {**c["baselines"], **c["impls"]}.items()}
    print(f"  {n}: case wall {c['wall_s']}", " ".join(f"{k} {m:.4f}" for k, m in meds.items()))
PY
  done
done
