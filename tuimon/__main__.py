"""`python -m tuimon`."""

import sys

from tuimon.cli import main

sys.exit(main())
