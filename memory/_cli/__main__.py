"""``python -m tiermem.memory._cli``: the ``tiermem`` command."""

from ._main import main

main()
