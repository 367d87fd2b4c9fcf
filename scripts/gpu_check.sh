#!/usr/bin/env bash
# One batched GPU session: versions, staff grade (correctness + timing), bench table, stub grade, gpu tests.
# Usage (on a GPU host, in the repo root):
#   OUT=DIR bash scripts/gpu_check.sh [steps...]
# Steps: pyc env staff bench stub tests large calibrate recorded (default: env staff bench stub tests). `pyc` first
# compiles site-packages to bytecode where the host's torch has none (each grade process compiled torch from source
# there: docs/performance.md, Grade cost); the container's pip install has them. Logs go to
# $OUT/<step>.log. `calibrate` writes this GPU's baseline record ($OUT/record.json); `recorded` grades the staff
# kernels with it (docs/performance.md, "A batch's baselines"): compare its timing phase and score with `staff`.
# Measures what docs/performance.md quotes from runs 1-2 (the copy ceiling, a staff grade's times and phases, the
# bench table) and checks the GPU test tier; "Reproducing the figures" there lists it.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 GRADER_CACHE=${GRADER_CACHE:-/tmp/grader-cache}
steps=${*:-env staff bench stub tests}
run() { local name=$1; shift; echo "=== $name: $*"; local t0=$(date +%s.%N)
  "$@" >"$OUT/$name.log" 2>&1; local rc=$?; local t1=$(date +%s.%N)
  echo "=== $name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))")s"; tail -n ${TAIL:-40} "$OUT/$name.log"; }
for s in $steps; do case $s in
  pyc) run pyc bash -c 'python3 -m compileall -q -j 0 "$(python3 -c "import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))")" >/dev/null; echo "compileall exit $? (1: some file of some package does not compile, e.g. test data; the rest did)"' ;;
  env) run env bash -c 'python3 -c "import sys,torch,triton,yaml,rich;print(sys.version);print(torch.__version__,torch.version.cuda,triton.__version__,yaml.__version__,rich.__file__)"; nvcc --version|tail -2; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; python3 -m pip list 2>/dev/null|grep -iE "^(nox|pytest|matplotlib|rich|pyyaml) "' ;;
  staff) run staff python3 -m grader grade --staff --out "$OUT/staff" ;;
  bench) run bench python3 -m grader bench --staff --out "$OUT/bench" ;;
  stub) TAIL=15 run stub python3 -m grader grade --out "$OUT/stub" --no-perf ;;
  tests) run tests python3 -m pytest -q -m gpu -x ;;
  large) run large python3 scripts/large_cases.py ;;
  calibrate) run calibrate python3 -m grader.performance.calibrate --out "$OUT/record.json" ;;
  recorded) GRADER_BASELINE_RECORD="$OUT/record.json" run recorded python3 -m grader grade --staff --out "$OUT/recorded" ;;
esac; done
