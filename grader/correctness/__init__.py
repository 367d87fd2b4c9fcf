"""The correctness stage: run every case in the child, check each result against the fp64 truth, explain the
failures; the static and kernel checks; on a GPU, a CUDA part's correctness pass under compute-sanitizer
(sanitizer.py)."""
