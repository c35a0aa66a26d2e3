"""``python -m dpfair.cli`` is the ``dpfair`` command (as ``python -m dpfair`` is)."""

import sys

from dpfair.cli.main import console_main

sys.exit(console_main())
