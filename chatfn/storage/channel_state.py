"""What a channel keeps between runs, one text value per (platform, key) in `channel_state`
(`ChannelHost.load_state` / `save_state`; `chatfn login NAME` writes a channel's login here).
Each call is one short transaction; a write replaces the value (delete, insert: the same on
every database), None deletes it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import and_, delete, insert, select
from sqlalchemy.engine import Engine

from chatfn.storage.models import channel_state_table as t

__all__ = ["load", "save"]


def load(engine: Engine, platform: str, key: str) -> str | None:
    with engine.connect() as conn:
        value = conn.execute(
            select(t.c.value).where(t.c.platform == platform, t.c.key == key)
        ).scalar()
    return None if value is None else str(value)


def save(engine: Engine, platform: str, key: str, value: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(delete(t).where(and_(t.c.platform == platform, t.c.key == key)))
        if value is not None:
            conn.execute(
                insert(t).values(
                    platform=platform, key=key, value=value, updated_at=datetime.now(UTC)
                )
            )
