"""``python -m dpfair`` is the ``dpfair`` command."""

import sys

from dpfair.cli import main

sys.exit(main())
