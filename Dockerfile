# The grader in an NVIDIA CUDA container (nvcc inside: student .cu files are built at grading time).
#
# Build:  docker build -t glu-grader .
# Run:    docker run --rm --gpus all --network none --read-only --tmpfs /scratch:mode=1777 \
#           -v "$PWD/assignment:/submission:ro" -v "$PWD/out:/results" \
#           [-v /path/to/seed:/run/secrets/grader_seed:ro] glu-grader
# Gives /results/results.json (Gradescope's format).
#
# Hardening (docs/SECURITY.md): the grader process is root inside the container only to keep the secret seed
# and /results out of the submission's reach; every student process runs as the unprivileged user `student`
# (the worker drops to GRADER_STUDENT_UID before importing anything), with no network, a read-only
# submission mount and only /scratch writable.

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
COPY reference ./reference
COPY assignment ./assignment

ENV GRADER_STUDENT_UID=10001 \
    GRADER_CACHE=/scratch/cache \
    TRITON_CACHE_DIR=/scratch/triton \
    TORCHINDUCTOR_CACHE_DIR=/scratch/inductor \
    HOME=/scratch

ENTRYPOINT ["python", "-m", "grader", "autograde"]
CMD ["--submission", "/submission", "--out", "/results", "--secret-file", "/run/secrets/grader_seed"]
