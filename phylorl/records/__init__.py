"""The state format's one owner: records of states and transitions, and the network inputs made from them.

A record holds a tree state (:class:`~phylorl.types.Observation`) or a transition between two, as the tree's
arrays and the rich features' per-tree parts: a few kilobytes where the features themselves are tens. Actors
write them (:mod:`~phylorl.records.codec`), the replay service stores and checks them, and the learner and the
inference endpoint turn a batch of them into tensors in one compiled pass (:mod:`~phylorl.records.collate`).

==================  ===================================================================================
``format``          the byte layout's constants and :class:`~phylorl.records.format.PackedRecords`
``arrays``          how one array is stored (cast, dictionary, ranked), in Python
``codec``           records from observations and transitions, and back
``reader``          compiled reading of record headers and stored arrays
``features``        the network's features of a stored tree (compiled): slot tables, edge and parsimony
                    columns
``moves``           every move of a stored state with its features, in compact form (compiled)
``batch``           a batch of records into the network's input arrays in one pass, with its checks (compiled)
``collate``         those arrays as tensors: the learner's batches and the endpoint's requests
==================  ===================================================================================

The package imports none of its modules, so that the format's constants are read without numba.
"""
