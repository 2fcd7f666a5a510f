"""Generated protobuf and gRPC modules for package ``phylorl.v1``.

Do not edit: regenerate with ``python scripts/gen_protos.py``.
"""
