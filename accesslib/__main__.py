"""``python -m accesslib ...``: the command line (see :mod:`accesslib.cli`)."""
import sys

from accesslib.cli import main

sys.exit(main())
