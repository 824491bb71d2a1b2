"""Several engines (several starting workers) creating a schema on one database at the same
moment, released by one barrier: what the "workers creating tables together" tests share."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine


def create_at_once(url: str, create: Callable[[Engine], None], workers: int = 4) -> list[str]:
    """Run `create(engine)` on `workers` engines of `url` at once; the first line of each
    error raised."""
    engines = [create_engine(url) for _ in range(workers)]
    start, errors = threading.Barrier(workers), []

    def run(engine: Engine) -> None:
        start.wait()
        try:
            create(engine)
        except Exception as exc:  # noqa: BLE001 - what the tests look for
            errors.append(str(exc).splitlines()[0])

    threads = [threading.Thread(target=run, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in engines:
        e.dispose()
    return errors
