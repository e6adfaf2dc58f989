"""``python -m ktx`` is the same as the ``ktx`` command."""

import sys

from ktx.cli import main

sys.exit(main())
