"""Which modules hold built-in functions. Importing one registers its functions globally;
`register_builtins` copies them into a bot's own registry."""

from __future__ import annotations

import importlib

from function_calls.registry import Registry

BUILTIN_MODULES: tuple[str, ...] = ("function_calls.handlers",)


def register_builtins(registry: Registry) -> int:
    count = 0
    for name in BUILTIN_MODULES:
        count += registry.include(importlib.import_module(name))
    return count
