from phylorl.agent.sumtree import SumTree, check_priorities  # noqa: F401  (the library owns the sum tree)
