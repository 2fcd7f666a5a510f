"""The wire contract in Python: the generated ``phylorl.v1`` protobuf/gRPC code (``v1/``, from
``protos/phylorl/v1/*.proto`` by ``python scripts/gen_protos.py``) and the numpy codecs of its messages
(:mod:`phylorl.wire.codec`)."""
