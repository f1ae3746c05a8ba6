"""The core of tiermem: records, options, subjects, errors, the store, embedders, recall, tools.

Implementation modules only; the public names are exported by :mod:`tiermem`. Lower layers
(``tiermem.prompts``, ``tiermem.pipelines``) import the leaf modules here directly, never the
facade, so every package can be the first import of an interpreter.
"""

__all__: list[str] = []
