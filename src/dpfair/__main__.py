"""``python -m dpfair`` is the ``dpfair`` command."""

import sys

from dpfair.cli.main import console_main

sys.exit(console_main())
