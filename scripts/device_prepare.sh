#!/usr/bin/env bash
# Gather, here, what a lent GPU machine needs to run benchmarks/device_lease.sh: that machine reaches no network,
# its python3 is 3.12 with torch, Triton, torch-geometric, numba and most of the scientific stack already there
# (/work/.library/device/KINDS.md lists them), and it has no redis-server.
#
#   bash scripts/device_prepare.sh     # (repo root) fills .whl/ and .devbin/, both ignored by git, ~20 MB
#
# .whl/: wheels for Python 3.12 of the packages that machine lacks, or holds in versions the generated gRPC code
# here does not accept (grpcio and protobuf check their own versions at import), each in the version installed here.
# .devbin/: this machine's redis-server with the libraries Debian links it to that an Ubuntu image may lack, and a
# wrapper that runs it with them (.devbin/bin/redis-server). Then, with the device tool:
#   run  command: LIMIT=550 bash benchmarks/device_lease.sh   carry: [".whl", ".devbin"]   timeout_s: 570
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(grpcio grpcio-health-checking protobuf redis hiredis dendropy py-spy)
rm -rf .whl .devbin
mkdir -p .whl .devbin/bin .devbin/lib .devbin/libexec
PLATFORMS=()
for p in manylinux_2_39_x86_64 manylinux_2_35_x86_64 manylinux_2_34_x86_64 manylinux_2_31_x86_64 manylinux_2_28_x86_64 \
         manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  PLATFORMS+=(--platform "$p")
done
for pkg in "${PACKAGES[@]}"; do
  version=$(python3 -c "import importlib.metadata as m; print(m.version('$pkg'))")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLATFORMS[@]}" -d .whl "$pkg==$version" 2>/dev/null \
    || python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl "$pkg==$version"
done
server=$(readlink -f "$(command -v redis-server)")
cp "$server" .devbin/libexec/redis-server
for lib in liblzf.so.1 libjemalloc.so.2 libatomic.so.1; do
  cp -L "$(ldd "$server" | awk -v l="$lib" '$1 == l {print $3}')" .devbin/lib/
done
cat > .devbin/bin/redis-server <<'EOF'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/../libexec/redis-server" "$@"
EOF
chmod +x .devbin/bin/redis-server
.devbin/bin/redis-server --version
ls .whl
du -sh .whl .devbin
