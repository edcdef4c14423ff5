"""``python -m controller.cli``: the same as the ``mpijob-controller`` command."""

import sys

from controller.cli.commands import main

sys.exit(main())
