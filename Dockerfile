# The grader in an NVIDIA CUDA container (nvcc inside: student .cu files are built at grading time).
#
# Build:  docker build -t glu-grader .
# Run:    docker run --rm --gpus all --network none --read-only --tmpfs /scratch:mode=1777 \
#           -v "$PWD/assignment:/submission:ro" -v "$PWD/out:/results" \
#           [-v /path/to/grader_key:/run/secrets/grader_key:ro] glu-grader
# Gives /results/results.json (Gradescope's format). The key: `python -m grader keygen --out grader_key`, once (a new
# file of mode 0600 holding 256 random bits); without it the grade is advisory and unsigned.
#
# Hardening (docs/SECURITY.md): the grader process is root inside the container, so that it can run every
# untrusted process (the submission's workers and its nvcc build) as the unprivileged user `student`
# (GRADER_STUDENT_UID), from a private scratch under /scratch, with a fresh environment. That user cannot read
# the key file (root, 0600) or /results, write the grader or its Python, or signal the grader and its trusted
# workers. No network, a read-only root and submission, and no staff solutions in the image (.dockerignore).

# Tag: nvidia/cuda:13.0.1-devel-ubuntu24.04 (multi-arch index digest).
FROM nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:7d2f6a8c2071d911524f95061a0db363e24d27aa51ec831fcccf9e76eb72bc92

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/venv \
 && useradd --create-home --uid 10001 student

WORKDIR /grader
# Same install step as `nox -s grade`: the requirements list and constraints.txt are the one source of truth.
COPY constraints.txt requirements.txt ./
RUN python -m pip install -c constraints.txt -r requirements.txt

COPY grader ./grader
# The problem's public parts only: spec, truth and baselines (reference.py), the handout. No staff solutions.
COPY reference ./reference
COPY assignment/README.md ./assignment/README.md

# TMPDIR: the grade's private scratch and the trusted caches live on the /scratch tmpfs (the root is read-only).
# Workers get their own HOME, TMPDIR and Triton/Inductor caches there (grader/identity.py), not these.
ENV GRADER_STUDENT_UID=10001 \
    GRADER_CACHE=/scratch/cache \
    TMPDIR=/scratch \
    HOME=/scratch

ENTRYPOINT ["python", "-m", "grader", "autograde"]
CMD ["--submission", "/submission", "--out", "/results", "--secret-file", "/run/secrets/grader_key"]
