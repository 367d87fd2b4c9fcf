"""Everything that runs beside student code, in an untrusted worker process.

The trust boundary of the grader is this package's edge:
- code here runs in a spawned child that imports the submission (or, for the trusted baselines, the staff's
  reference module), so nothing here is trusted to report the truth: the parent (the rest of `grader`) checks
  every reply as data, with its own clocks and its own float64 truth;
- nothing here imports from the trusted side (`tests/test_boundary.py` checks it), so a worker never has the
  secret, the truth, the spec's scoring or the signing code in its interpreter;
- the trusted side imports from here only the pieces that must agree on both ends (the message format, the
  input generator, the launch records' format).
"""
