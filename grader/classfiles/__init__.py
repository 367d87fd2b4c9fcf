"""A class's files on disk, as data: where a class's submissions are (discover.py: per-student folders, a Gradescope
export, a list of repositories) and what a batch keeps under its OUT (state.py: the manifest, each result's record,
the attempts). The batch (grader/batch/) writes them as it grades; the report's readers (the similarity report) read
them. They sit beside report/ in the layers (tests/test_architecture.py), below the batch that runs the grades."""
