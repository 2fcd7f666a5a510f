import sys

from phylorl.cli import main

sys.exit(main())
