"""The `reminders:` section of config.yaml."""

from __future__ import annotations

from pydantic import Field, field_validator

from function_calls import Section, zone_named


class ReminderSettings(Section):
    """`reminders:`: reminders users set in chat (`/reminder_set`, or by asking the model),
    kept in the database and delivered even after a restart."""

    # Off: the reminder functions and commands are not offered.
    enabled: bool = True
    # IANA zone for times users and the model write ("Europe/Berlin"); None: bot.timezone, else
    # the machine's.
    timezone: str | None = None
    # Seconds after its due time that a reminder missed while the bot was down is still
    # delivered (late, with a note); older ones are reported as missed instead.
    grace_period: float = Field(default=3600.0, ge=0)
    # Seconds between two looks at the table for due reminders no wake-up of this process
    # fired (one set through a worker that has died since): every worker looks, and the first
    # to claim an occurrence delivers it, so a due reminder fires within about this long.
    sweep_interval: float = Field(default=5.0, gt=0, le=3600)
    # Active reminders one user may have at a time.
    max_per_user: int = Field(default=20, ge=1, le=10000)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        if v:
            try:
                zone_named(v)
            except (KeyError, ValueError):
                raise ValueError(
                    f"unknown time zone {v!r} (use an IANA name such as 'Europe/Berlin')"
                ) from None
        return v or None
