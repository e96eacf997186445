"""`python -m cube.cli`: the saferl command line."""

import sys

from cube.cli.entry import main

sys.exit(main())
