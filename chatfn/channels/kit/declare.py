"""What a channel's declaration (`SPEC` in its `__init__`) uses: its documentation, kept as a
Markdown file beside the package (README.md) rather than as a string in the code."""

from __future__ import annotations

from pathlib import Path

__all__ = ["readme"]


def readme(module_file: str) -> str:
    """The README.md beside `module_file` (pass `__file__`): `ChannelSpec.readme`."""
    return (Path(module_file).parent / "README.md").read_text(encoding="utf-8")
