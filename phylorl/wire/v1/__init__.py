"""Generated protobuf and gRPC modules for package ``phylorl.v1``.

Do not edit: regenerate with ``bash scripts/gen_protos.sh``.
"""
