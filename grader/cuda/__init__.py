"""Building CUDA sources: nvcc for the GPU, the CUDA-on-CPU layer, what the compiler reports, compute-sanitizer."""
