"""Building CUDA sources: the one build step (part.py: nvcc for the GPU, the CUDA-on-CPU layer, the compute-sanitizer
harness) and its one runner of untrusted processes (runner.py); what the compiler reports. The correctness pass
under compute-sanitizer is the correctness stage's (grader/correctness/sanitizer.py)."""
