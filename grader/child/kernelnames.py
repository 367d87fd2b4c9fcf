"""ATen op names that move or describe memory but compute nothing (shared by the worker and grader/kernelcheck.py).

The worker leaves these out of what it reports for its own snapshot of an output; the parent treats every other
ATen op in a correctness call as PyTorch doing the work.
"""

# Host-side ATen ops that move or describe memory but compute nothing. Anything else is compute.
MEMORY_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "view", "reshape", "_reshape_alias",
    "as_strided", "slice", "select", "narrow", "copy_", "set_", "contiguous", "clone", "detach", "alias",
    "unsqueeze", "squeeze", "expand", "permute", "transpose", "t", "to", "_to_copy", "lift_fresh",
    "resolve_conj", "resolve_neg", "item", "_local_scalar_dense", "zeros", "zeros_like", "fill_", "zero_",
    "flatten", "unflatten", "chunk", "split", "split_with_sizes", "unbind", "full", "full_like", "new_zeros",
    "new_full", "record_stream", "is_nonzero", "_unsafe_view", "unfold", "view_as", "expand_as", "empty_permuted",
}
