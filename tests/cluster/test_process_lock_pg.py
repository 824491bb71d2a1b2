"""One bot process per database on PostgreSQL too (issue 34, item 4): a single process holds a
session advisory lock, and a second one on the same database is refused with a line naming the
first (pid, host, since when); another database is not affected, and the lock goes with its
connection."""

from __future__ import annotations

import os
import re
import socket

import pytest
from sqlalchemy.engine import make_url

from chatfn.runtime import process_lock
from chatfn.runtime.process_lock import DatabaseInUse

pytestmark = pytest.mark.services


def test_a_second_process_on_the_same_postgresql_database_is_refused(pg_url: str) -> None:
    first = process_lock.take(pg_url)
    try:
        with pytest.raises(DatabaseInUse) as refused:
            process_lock.take(pg_url)
        line = str(refused.value)
        assert "\n" not in line
        assert make_url(pg_url).render_as_string(hide_password=True) in line
        assert f"pid {os.getpid()} on host {socket.gethostname()}, since " in line
        assert re.search(r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", line)
        # Another database of the same server is another bot's.
        other = make_url(pg_url).set(database="postgres").render_as_string(hide_password=False)
        process_lock.take(other).release()
    finally:
        first.release()
    process_lock.take(pg_url).release()  # released with its connection: taken again
