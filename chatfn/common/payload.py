"""Reading a platform's JSON payload, which is untrusted: a field that should hold an object may
be missing, null or of another type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def object_at(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`data[key]` when it is a JSON object, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}
