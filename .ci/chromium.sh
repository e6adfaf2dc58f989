# Sourced by .ci/run: install Chromium for the report's headless-browser test, when possible.
# Idempotent, and never fails CI: without apt-get (or without root) the test skips and says why.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
   && ! command -v google-chrome >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } >/dev/null 2>&1 \
      || echo "warning: could not install chromium; the report's browser test will be skipped" >&2
  else
    echo "warning: no chromium and no root apt-get; the report's browser test will be skipped" >&2
  fi
fi
true
