"""Built-in reminders: `reminder_set`, `reminder_list`, `reminder_delete`, stored in the bot's
database with APScheduler's job store, so they survive restarts and fire exactly once."""

from __future__ import annotations

from function_calls import CoreSettings, Plugin, PluginHost, Status
from function_calls.builtins.reminders.console import VIEW, chat_names
from function_calls.builtins.reminders.functions import (
    reminder_delete,
    reminder_list,
    reminder_set,
)
from function_calls.builtins.reminders.service import TABLES, ReminderService
from function_calls.builtins.reminders.settings import ReminderSettings
from function_calls.builtins.reminders.texts import TEXTS

__all__ = [
    "ReminderService",
    "ReminderSettings",
    "reminder_delete",
    "reminder_list",
    "reminder_set",
]

plugin = Plugin("reminders", settings=ReminderSettings, texts=TEXTS, console=[VIEW], tables=TABLES)
# The console shows a chat by the name its reminders were set with.
plugin.chat_names(chat_names)


@plugin.status
def status(cfg: ReminderSettings) -> Status:
    if not cfg.enabled:
        return Status("off", "reminders.enabled is false")
    zone = cfg.timezone or "bot.timezone or the machine's time zone"
    return Status(
        "on", f"{zone}, grace period {cfg.grace_period:g} s, at most {cfg.max_per_user} per user"
    )


@plugin.adopt
def zone_for_the_bot(settings: CoreSettings, cfg: ReminderSettings) -> None:
    """Before `bot.timezone` existed, `reminders.timezone` also set the zone of the system
    prompt; a config that sets only the latter keeps meaning the same."""
    if settings.bot.timezone is None and cfg.timezone:
        settings.bot.timezone = cfg.timezone


@plugin.on_setup
def create_service(host: PluginHost) -> None:
    """The service exists from the start (handlers may run before `start`); its scheduler is
    made on first need and runs once the bot started, because it needs a running event loop."""
    host.provide(ReminderService(host, host.section(ReminderSettings), plugin.database(host)))


@plugin.on_startup
async def start(host: PluginHost) -> None:
    service = host.service(ReminderService)
    if service is not None:
        await service.start()


@plugin.on_shutdown
async def stop(host: PluginHost) -> None:
    service = host.service(ReminderService)
    if service is not None:
        await service.shutdown()
