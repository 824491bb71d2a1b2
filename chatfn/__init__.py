"""The `chatfn` command: the top layer, which composes channels, runtime, storage and models
into a running bot (`chatfn run`), checks a setup (`chatfn check`), migrates its database
(`chatfn migrate`) and starts a new bot folder (`chatfn init`). `bot.py` and `check_system.py`
are thin entry points over the same modules.
"""

from chatfn.common.version import __version__

__all__ = ["__version__"]
