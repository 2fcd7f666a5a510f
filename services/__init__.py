"""The services of the system (actor, replay, learner, launcher), each run as ``python -m services.<name>``.

Importing the package points numba's cache of compiled kernels at a directory keyed by phylorl's source
(:mod:`phylorl.jit_cache`), before any service imports a kernel.
"""

from phylorl.jit_cache import use_source_keyed_cache

use_source_keyed_cache()
