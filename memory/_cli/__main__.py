"""``python -m tiermem.memory._cli``: the ``tiermem`` command."""

import sys

from ._main import main

if __name__ == "__main__":
    sys.exit(main())  # its exit code: 1 after an error line
