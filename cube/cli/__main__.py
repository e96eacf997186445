"""`python -m cube.cli`: the saferl command line."""

import sys

from cube.cli.entry import console_main

sys.exit(console_main())
