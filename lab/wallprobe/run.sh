#!/usr/bin/env bash
# Where does a correct kernel's wall-clock excess come from? Bench the staff kernels beside 'ctl' (F.glu in an
# untrusted worker) with and without a separate uid; print each implementation's excess per case.
set -u
OUT=${OUT:-/tmp/wallprobe}
for i in 1 2; do
  python3 -m grader bench --problem lab/wallprobe/spec.yaml --staff --out "$OUT/sep$i" > "$OUT/sep$i.log" 2>&1
done
GRADER_SAME_UID=1 python3 -m grader bench --problem lab/wallprobe/spec.yaml --staff --out "$OUT/same1" > "$OUT/same1.log" 2>&1
python3 lab/wallprobe/summary.py "$OUT"/sep1 "$OUT"/sep2 "$OUT"/same1
