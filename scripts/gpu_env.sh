# Source on a lent GPU host (no package index): install the carried wheels and ktx itself.
#   source scripts/gpu_env.sh
# The wheels come from ../shared/tools/gpu-wheelhouse .whl (carried as .whl).
# Idempotent: a second source in the same environment (parallel lanes) installs nothing.
if [ -z "${KTX_ENV_READY:-}" ]; then
set -e
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | grep -v WARNING || true
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING || true
set +e
export KTX_ENV_READY=1
fi
