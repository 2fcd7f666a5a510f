"""The wire contract in Python: the generated ``phylorl.v1`` protobuf/gRPC code (``v1/``, from
``protos/phylorl/wire/v1/*.proto`` by ``bash scripts/gen_protos.sh``) and the numpy codecs of its messages
(:mod:`phylorl.wire.codec`)."""
