"""The wire contract in Python: generated ``phylorl.v1`` protobuf/gRPC code and numpy codecs.

``v1/``        generated from ``protos/phylorl/v1/*.proto`` by ``python scripts/gen_protos.py``
``codec``      ndarray / Observation / Transition <-> protobuf messages, packed record batches
``record``     compact lossless binary record of one Transition (what Redis holds)
``protowire``  minimal protobuf wire reader/writer for zero-copy handling of large bytes fields
``synthetic``  random transitions with realistic shapes, for tests and benchmarks
"""
