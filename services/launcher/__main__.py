"""``python -m services.launcher``: ``phylorl train`` (see :mod:`services.launcher.cli`)."""

import sys

from services.launcher.cli import main

if __name__ == "__main__":
    sys.exit(main())
