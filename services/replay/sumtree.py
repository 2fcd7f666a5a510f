from phylorl.agent.sumtree import SumTree  # noqa: F401  (the library owns the sum tree)
