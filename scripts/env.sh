# Sourced by brigade's scripts: puts a CUDA toolkit in the usual place on PATH so that BRIGADE_CUDA=AUTO
# finds it, and picks the build parallelism.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
: "${BRIGADE_JOBS:=$(nproc 2>/dev/null || echo 2)}"
export BRIGADE_JOBS
