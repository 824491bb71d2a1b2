"""The start-up line: what a user needs to see to know the bot runs on what they meant, the
config file, the database, the plugin folders and what each gave, the model and the channels."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatfn.runtime.plugins import plugin_folders

if TYPE_CHECKING:
    from chatfn.runtime.bot import Bot


def startup_line(bot: Bot, role: str, channels: list[str]) -> str:
    """ "chatfn started: config ..., database ..., plugins ..., role=..., model=..., ..."; the
    database URL without its password (Storage.safe_url)."""
    settings = bot.settings
    config = getattr(settings, "config_file", None)
    where = str(config) if config else f"none (defaults, paths from {settings.base_dir})"
    folders = plugin_folders(
        settings.plugins.paths, settings.base_dir, getattr(settings, "plugins_loaded", None)
    )
    plugins = "; ".join(f.describe() for f in folders) or "none"
    return (
        f"chatfn started: config {where}, database {bot.storage.safe_url}, plugins {plugins}, "
        f"role={role}, model={bot.model.name if bot.model else 'none'}, "
        f"functions={len(bot.registry)}, channels={','.join(channels) or 'none'}"
    )
