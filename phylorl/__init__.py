"""phylorl: reinforcement-learning agents that search phylogenetic tree space."""

__version__ = "0.1.0"
