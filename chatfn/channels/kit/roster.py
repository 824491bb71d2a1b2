"""Who is who in a group, for a sender's name and role (owner, admin): the group's owners,
managers and member names asked of the platform once and kept `ttl` seconds, a failure too
(one warning, not one per message); a user missing from a list older than `fresh` seconds
asks again (a member who just joined)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from loguru import logger

from chatfn.channels.kit.cache import Remembered

__all__ = ["Roster", "Rosters", "roles"]


def roles(owner: bool, admin: bool) -> list[str]:
    """A sender's roles as the bot takes them (`bot.trust_group_admins`): "owner" for the
    group's owner, else "admin" for one the platform says manages it, else none."""
    return ["owner"] if owner else ["admin"] if admin else []


@dataclass(frozen=True, slots=True)
class Roster:
    """A group's owners, admins (managers) and names by user id."""

    owner: list[str] = field(default_factory=list)
    admin: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)


class Rosters(Remembered[str, Roster]):
    """Rosters by group (module docstring): `read(group)` asks the platform; an error of
    `errors` is warned with `warning` (`{}`: the group, the error) and kept as an empty one."""

    def __init__(
        self,
        ttl: float,
        read: Callable[[str], Awaitable[Roster]],
        errors: tuple[type[BaseException], ...],
        warning: str,
        fresh: float = 10.0,
    ) -> None:
        super().__init__(ttl)
        self._read, self._errors, self._warning, self.fresh = read, errors, warning, fresh

    async def person(self, group: str, user: str) -> tuple[str, list[str]]:
        """(name, roles) of `user` in `group`: its first role of "owner", "admin", if any."""
        roster = self.get(group)
        if roster is None or (user not in roster.names and self.get(group, self.fresh) is None):
            try:
                roster = await self._read(group)
            except self._errors as exc:
                logger.warning(self._warning, group, exc)
                roster = Roster()
            self.put(group, roster)
        return roster.names.get(user, ""), roles(user in roster.owner, user in roster.admin)
