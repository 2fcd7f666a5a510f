#!/bin/sh
# Build stages of deploy/Dockerfile, in two steps so that a change of source rebuilds only phylorl's wheel:
#   pip_install.sh deps   the virtual environment /opt/venv with torch (TORCH_SPEC) and /build/deps.txt
#   pip_install.sh wheel  phylorl's wheel from /build/src into /build/dist (the final stage installs it)
# PIP_SOURCE=wheelhouse installs with --no-index from /build/wheelhouse (no network). PIP_SOURCE=index installs
# from the package index (CA bundle /build/ca.crt when not empty), torch from /build/wheelhouse when a torch
# wheel is there, else from TORCH_INDEX_URL when set, else from the index.
set -eu
pip="/opt/venv/bin/pip --disable-pip-version-check --no-cache-dir"
if [ -s /build/ca.crt ]; then export PIP_CERT=/build/ca.crt; fi
case "$PIP_SOURCE" in
  wheelhouse) source_args="--no-index --find-links /build/wheelhouse" ;;
  index) source_args="--find-links /build/wheelhouse" ;;
  *) echo "PIP_SOURCE must be wheelhouse or index, got $PIP_SOURCE" >&2; exit 2 ;;
esac
case "$1" in
  deps)
    python3 -m venv /opt/venv
    torch_in_wheelhouse=$(ls /build/wheelhouse/torch-*.whl 2>/dev/null || true)
    if [ "$PIP_SOURCE" = index ] && [ -z "$torch_in_wheelhouse" ] && [ -n "$TORCH_INDEX_URL" ]; then
      $pip install --index-url "$TORCH_INDEX_URL" "$TORCH_SPEC"
    fi
    $pip install $source_args "$TORCH_SPEC" -r /build/deps.txt
    # slim: torch's own test data and C++ headers (for compiling extensions; the image has no compiler)
    rm -rf /opt/venv/lib/python3*/site-packages/torch/test /opt/venv/lib/python3*/site-packages/torch/include ;;
  wheel)
    # fixed timestamps: the same source gives the same wheel, so the final stage's layers stay cached
    SOURCE_DATE_EPOCH=315532800 $pip wheel $source_args --no-deps --wheel-dir /build/dist /build/src ;;
  *) echo "usage: pip_install.sh deps|wheel" >&2; exit 2 ;;
esac
