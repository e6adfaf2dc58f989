# Sourced by .ci/run: make sure CUDA's compiler is on PATH for the compile tests.
# The CI image ships nvcc 13.0; on a fresh machine without it, install the same compiler from
# PyPI's NVIDIA wheels into .cuda/ (ignored by git) and put it on PATH. Never fails CI: without
# nvcc the compile tests skip with a reason.
if ! command -v nvcc >/dev/null 2>&1; then
  if [ ! -x .cuda/venv/lib/nvidia-bin/nvcc ]; then
    echo "nvcc not found: installing CUDA 13.0's nvcc from PyPI into .cuda/" >&2
    python3 -m venv .cuda/venv \
      && .cuda/venv/bin/pip install -q "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" \
           "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*" \
      && bin=$(dirname "$(find .cuda/venv -path '*nvidia/cu13/bin/nvcc' -type f | head -n 1)") \
      && ln -sfn "$(cd "$bin" && pwd)" .cuda/venv/lib/nvidia-bin \
      || echo "warning: could not install nvcc; compile tests will be skipped" >&2
  fi
  if [ -x .cuda/venv/lib/nvidia-bin/nvcc ]; then
    PATH="$(cd .cuda/venv/lib/nvidia-bin && pwd):$PATH"
    export PATH
  fi
fi
