# The grader in an NVIDIA CUDA container (nvcc inside: student .cu files are built at grading time).
#
# Build:  docker build -t kernel-grader .
# Run:    docker run --rm --gpus all --network none --read-only --tmpfs /scratch:mode=1777,exec \
#           -v "$PWD/assignment:/submission:ro" -v "$PWD/out:/results" \
#           [-v /path/to/grader_key:/run/secrets/grader_key:ro] kernel-grader
# Needs an NVIDIA driver >= 580 on the host (CUDA 13.0; checked at start) and the NVIDIA container toolkit. /scratch
# must allow exec (built kernels are loaded from it; Docker's --tmpfs is noexec unless told).
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

# python3-dev: Triton's JIT compiles a small C launcher against Python.h on a GPU. bubblewrap: each untrusted process of
# a grade in a box of its own (grader/box.py), where the container is allowed to make one (CAP_SYS_ADMIN, e.g.
# `--cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined`); otherwise the grade
# records containment "container": GRADER_CONTAINMENT below says this image runs one grade per container.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-dev python3-venv bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/venv \
 && useradd --create-home --uid 10001 student

WORKDIR /grader
# Same install step as `nox -s grade`: the requirements list and constraints.txt are the one source of truth.
COPY constraints.txt requirements.txt ./
RUN python -m pip install -c constraints.txt -r requirements.txt

COPY grader ./grader
# The problems' public parts (spec, words in hints.yaml, truth and baselines in reference.py) and the stubs with their
# handouts: what .dockerignore lets in, the list of grader/publish/public_files.py. No staff
# solutions.
COPY reference ./reference
COPY assignment ./assignment
# Bytecode for the grader and the problems' references, made once here: the root is read-only and
# PYTHONDONTWRITEBYTECODE is set, so without it every process of every grade (the parent, each worker) compiles them
# from source. pip wrote torch's own .pyc files at install; on a GPU host whose torch had none, `import torch` took
# 4.7 s instead of 1.95 s and a worker's first profiled call 8.3 s instead of 1.6 s (docs/performance.md, Grade cost).
RUN python -m compileall -q grader reference

# The root is read-only (--read-only); /scratch is the one writable place (a tmpfs): TMPDIR, HOME and the trusted
# caches live there, and each grade makes its private scratch under it. Workers get their own HOME, TMPDIR and
# Triton/Inductor caches inside that (grader/identity.py), not these. No .pyc writes: the root is read-only.
ENV GRADER_STUDENT_UID=10001 \
    GRADER_CONTAINMENT=container \
    PYTHONDONTWRITEBYTECODE=1 \
    GRADER_CACHE=/scratch/cache \
    TMPDIR=/scratch \
    HOME=/scratch \
    XDG_CACHE_HOME=/scratch/cache \
    TRITON_CACHE_DIR=/scratch/cache/triton \
    TORCHINDUCTOR_CACHE_DIR=/scratch/cache/inductor \
    MPLCONFIGDIR=/scratch/cache/matplotlib \
    CUDA_CACHE_PATH=/scratch/cache/nv

# Start-up check: this CUDA 13.0 image needs an NVIDIA driver >= 580 on the host. One line on stderr when no GPU
# is visible (no --gpus, no NVIDIA container toolkit) or the driver is older; the grade still runs (on CPU, where
# GPU points cannot be earned, or fails with --device cuda). Then the grader, with the arguments given (CMD).
ENTRYPOINT ["/bin/sh", "-c", "d=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1); case \"$d\" in [0-9]*) [ \"${d%%.*}\" -ge 580 ] || echo \"kernel-grader: NVIDIA driver $d is too old for this CUDA 13.0 image (needs >= 580): update the host driver; GPU parts cannot run\" >&2 ;; *) echo 'kernel-grader: no NVIDIA GPU visible (run with --gpus and the NVIDIA container toolkit; host driver >= 580): GPU parts cannot run' >&2 ;; esac; exec python -m grader autograde \"$@\"", "kernel-grader"]
CMD ["--submission", "/submission", "--out", "/results", "--secret-file", "/run/secrets/grader_key"]
