"""Grader for the GPU-kernel assignment. Entry point: `python -m grader grade --help`."""
