"""Set before litellm is first imported: it would otherwise fetch its model cost map over the network.

Every module of the LLM adapter imports this before litellm (``from . import _llm_offline``), so
whichever of them Python loads first, litellm reads the map shipped with it.
"""

from __future__ import annotations

import os

__all__: list[str] = []

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
