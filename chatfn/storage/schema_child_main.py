"""The child process of chatfn/storage/schema_child.py: reads `{"url": ...}` on stdin, runs
the pending migrations on that database as `chatfn migrate` does (`schema.upgrade`), and prints
one JSON line: `{"state": <the SchemaState found before>}` or `{"error": <the message>}`.
A module of its own so that the parent's side, imported by every bot, does not import the
storage it runs in the child."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from chatfn.storage import schema
from chatfn.storage.db import Storage


def main() -> int:
    """The child: read the URL, upgrade, print one JSON line (`state` or `error`)."""
    url = json.loads(sys.stdin.read())["url"]
    storage: Storage | None = None
    try:
        storage = Storage(url)
        before = schema.upgrade(storage.engine)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        print(json.dumps({"error": str(exc)}))
        return 1
    finally:
        if storage is not None:
            storage.close()
    print(json.dumps({"state": asdict(before)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
