#!/usr/bin/env bash
# strip_sources.sh DIR: rewrite every .tar.gz/.tgz under DIR (nested ones first) without project sources, so a
# device call's archive can be committed: the repository commits results, never fetched or derived kernel source
# (*.cu, *.cuh, *.h other than dispatch tables, *.patch, *.html, *.png, *.cubin, caches, stage folders).
set -euo pipefail
strip_one() {
  local arc=$1 tmp; tmp=$(mktemp -d)
  tar xzf "$arc" -C "$tmp"
  find "$tmp" -depth -type f \( -name '*.tar.gz' -o -name '*.tgz' \) -print0 | while IFS= read -r -d '' inner; do
    strip_one "$inner"; done
  find "$tmp" -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.patch' -o -name '*.html' -o -name '*.png' \
    -o -name '*.cubin' -o -name '*.ptx' -o -name '*.so' -o \( -name '*.h' ! -name '*dispatch*' \) \) -delete
  find "$tmp" -depth -type d \( -name '__pycache__' -o -name 'stage' -o -name '.cache' \) -exec rm -rf {} +
  tar czf "$arc" -C "$tmp" .
  rm -rf "$tmp"
}
find "$1" -type f \( -name '*.tar.gz' -o -name '*.tgz' \) -print0 | while IFS= read -r -d '' a; do strip_one "$a"; done
