#!/usr/bin/env bash
# Device call 3 (twelfth session): single grades of the four submissions whose batch results came back from call 2
# (the compare is made here), gelu's staff grade on the GPU after its Triton change, then three checks left over:
# shared_sync's sanitizer row, Nsight Compute on the staff CUDA kernel, the late-answer exploit's GPU test.
export PYTHONUNBUFFERED=1
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s); timeout "$lim" "$@" > "$OUT/$name.log" 2>&1; echo "== $name rc=$? $(( $(date +%s) - t0 )) s"; }
step single 175 python3 scripts/batch_gpu_check.py --out /tmp/bc --phase single --single broken_missing_mask,broken_swapped_halves,correct_cuda_pairs,correct_persistent_row_loop
cat "$OUT/single.log" | cut -c1-200
(cd /tmp/bc && tar czf "$OUT/single.tgz" single/*/results.json)
step gelu 130 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_gpu_problems.py -k gelu
grep -E "PASSED|FAILED|passed|failed|Error|%" "$OUT/gelu.log" | cut -c1-300 | tail -8
step verdict 70 python3 lab/cuda_verdicts.py --jobs 2 --only shared_sync --out /tmp/v
grep -E "^\|" "$OUT/verdict.log" | cut -c1-400
step profile 70 python3 -m grader profile --staff
grep -iE "ncu|nsight|dram|kernel|%|error" "$OUT/profile.log" | cut -c1-200 | head -25
step late 70 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_exploits.py -k spinning_kernel_with
grep -E "PASSED|FAILED|passed|failed|Error" "$OUT/late.log" | cut -c1-300 | tail -5
