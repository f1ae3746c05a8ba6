"""``python -m tiermem.memory._cli``: the ``tiermem`` command."""

import sys

from ._main import main

sys.exit(main())
