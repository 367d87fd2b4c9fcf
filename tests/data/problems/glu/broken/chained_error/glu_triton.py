"""BROKEN on purpose (tests/test_correctness.py): the wrapper fails with an error wrapped in another one.

Libraries do this (`raise RuntimeError(...) from e`; Triton wraps kernel errors the same way). The reason is in
the innermost exception, several frames deep: the grader must show it, not only the outer "launch failed".
"""

from __future__ import annotations

import torch


def _check_layout(h: int, depth: int) -> None:
    if depth:
        _check_layout(h, depth - 1)  # a deep stack, so that the reason is far from the traceback's last lines
    else:
        raise ValueError(f"h={h}: this kernel needs h to be a multiple of 4096")  # BUG: a made-up restriction


def _launch(x: torch.Tensor) -> torch.Tensor:
    try:
        _check_layout(x.shape[-1] // 2, depth=8)
    except ValueError as e:
        raise RuntimeError("launch failed") from e
    raise AssertionError("unreachable")


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    return _launch(x)
