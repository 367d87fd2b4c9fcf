"""Grade a whole class: `python -m grader batch SUBMISSIONS --out OUT [--engine local|slurm] ...`.

    task.py       one submission: checks, `python -m grader grade` in its own process, where it was graded
    where.py      the GPU (nvidia-smi) at the start and end of a grade: extra_data.graded_on
    engines.py    local (one task per GPU slot, pinned) and slurm (a job array and a collect job)
    progress.py   the live count
    collect.py    the TA report (grader/report/tareport.py), flagged, GPU models, throughput
    cli.py        the commands: batch, batch status, batch resubmit, batch collect, batch task

What it reads and writes on disk is grader/classfiles/ (below the batch, so the report's readers use it too):
    discover.py   SUBMISSIONS (folders, a Gradescope export, a list of git repositories) -> submissions
    state.py      what is done: results keyed by content + grader + spec (+ image), written whole, attempts

Exit codes of `batch`, `batch status` and `batch collect` (a task's own are in task.py):
    0  every submission is graded (whatever its score)
    2  cannot run: bad arguments, SUBMISSIONS unreadable, no sbatch for --engine slurm (one line says why)
    3  some submissions are "not graded: infrastructure" after their retries (grader or machine faults: never
       counted as a zero; run the batch again to retry them)
    4  some submissions are not gradable (the grader refused them, e.g. an empty folder); nothing else failed
    5  some submissions are still missing or running (Slurm: not finished, or killed; `batch status` prints the
       command that resubmits exactly those)
`batch --engine slurm` exits 0 once the jobs are submitted.
"""

EXIT_OK, EXIT_USAGE, EXIT_INFRA, EXIT_NOT_GRADABLE, EXIT_INCOMPLETE = 0, 2, 3, 4, 5
