"""Old address of the fetch helper, which lives in `chatfn.common.fetch` so that channels (which
may not import the plugin API) use the same one. Plugins and built-ins take its names from the
plugin API: `from function_calls import fetch, FetchError`."""

from chatfn.common.fetch import *  # noqa: F403
from chatfn.common.fetch import __all__ as __all__
