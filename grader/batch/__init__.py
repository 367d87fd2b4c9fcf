"""Grade a whole class: `python -m grader batch SUBMISSIONS --out OUT [--engine local|slurm] ...`.

Why: docs/architecture.md, "Modules: the why", grader/batch/__init__.py.
"""

EXIT_OK, EXIT_USAGE, EXIT_INFRA, EXIT_NOT_GRADABLE, EXIT_INCOMPLETE = 0, 2, 3, 4, 5
