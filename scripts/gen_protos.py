"""Regenerate the Python protobuf/gRPC code in ``phylorl/wire/v1`` from ``protos/phylorl/v1``.

Usage (from anywhere)::

    python scripts/gen_protos.py            # rewrite phylorl/wire/v1
    python scripts/gen_protos.py --check    # exit 1 when phylorl/wire/v1 is stale
    python scripts/gen_protos.py --out DIR  # write the generated files into DIR instead

protoc names Python modules after the proto paths (``phylorl/v1/common.proto`` → ``phylorl.v1``),
which would clash with our own ``phylorl`` package, so the generated imports are rewritten to
``phylorl.wire.v1``. The descriptors keep their canonical names (``phylorl/v1/*.proto``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROTO_ROOT = REPO / "protos"
PROTO_DIR = PROTO_ROOT / "phylorl" / "v1"
DEFAULT_OUT = REPO / "phylorl" / "wire" / "v1"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
INIT_TEXT = (
    '"""Generated protobuf and gRPC modules for package ``phylorl.v1``.\n\n'
    "Do not edit: regenerate with ``python scripts/gen_protos.py``.\n"
    '"""\n'
)


def generate(out_dir: Path) -> list[Path]:
    """Run protoc on every ``protos/phylorl/v1/*.proto`` and write the fixed-up modules to ``out_dir``."""
    from grpc_tools import protoc  # dev dependency (grpcio-tools), only needed here

    protos = sorted(PROTO_DIR.glob("*.proto"))
    if not protos:
        raise FileNotFoundError(f"no .proto files under {PROTO_DIR}")
    with tempfile.TemporaryDirectory() as raw:
        outs = [f"--{kind}_out={raw}" for kind in ("python", "pyi", "grpc_python")]
        args = ["protoc", f"-I{PROTO_ROOT}", *outs, *(str(p.relative_to(PROTO_ROOT)) for p in protos)]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed: {' '.join(args)}")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for src in sorted((Path(raw) / "phylorl" / "v1").iterdir()):
            text = src.read_text()
            text = text.replace("from phylorl.v1 import ", "from phylorl.wire.v1 import ")
            text = text.replace("(DESCRIPTOR, 'phylorl.v1.", "(DESCRIPTOR, 'phylorl.wire.v1.")
            dst = out_dir / src.name
            dst.write_text(text)
            written.append(dst)
    init = out_dir / "__init__.py"
    init.write_text(INIT_TEXT)
    written.append(init)
    for old in out_dir.iterdir():
        if old.name.endswith(GENERATED_SUFFIXES) and old not in written:
            old.unlink()
    return written


def stale_files(out_dir: Path) -> list[str]:
    """Names of files in ``out_dir`` that differ from (or are missing/extra against) a fresh generation."""
    with tempfile.TemporaryDirectory() as fresh_dir:
        fresh = {p.name: p.read_bytes() for p in generate(Path(fresh_dir))}
    current = {p.name: p.read_bytes() for p in out_dir.glob("*.py*") if p.is_file()}
    names = sorted(set(fresh) | set(current))
    return [n for n in names if fresh.get(n) != current.get(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument("--check", action="store_true", help="only report whether --out is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.out)
        if stale:
            print(
                f"stale generated code in {args.out}: {', '.join(stale)}; run `python scripts/gen_protos.py`",
                file=sys.stderr,
            )
            return 1
        print(f"{args.out} is up to date")
        return 0
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
