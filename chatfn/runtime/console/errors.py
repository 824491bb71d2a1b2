"""The one error the console's parts raise: the HTTP status and the message for the page."""

from __future__ import annotations


class ConsoleError(Exception):
    """A request the console cannot do: `status` 400 (bad input, `field` names it), 403, 404
    (no such thing, or a chat outside the user's scope: it does not say which), 409."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field

    def body(self) -> dict[str, str]:
        body = {"error": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body
