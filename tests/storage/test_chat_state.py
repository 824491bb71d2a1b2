"""Limit counters under concurrent connections (`ChatState.take`, `first_time`): exact, no
deadlock. Here on a SQLite file with threads (the shape storage work takes once it runs off the
event loop); tests/cluster/test_cluster_limits.py runs the same race on PostgreSQL."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from chatfn.storage.chat_state import ChatState, Check, Counter
from chatfn.storage.db import Storage


def race_for_slots(state: ChatState, threads: int = 8, tries: int = 10, slots: int = 25) -> None:
    """`threads` connections each try `tries` times to take one of `slots` slots of one user
    counter, together with a per-chat counter listed before or after it (the rows must be
    locked in one order whatever the list's): exactly `slots` succeed, and of the refused
    exactly one is "told"."""
    user = Counter("user", "http", "u1", "messages", "w")
    chats = [Counter("chat", "http", f"c{k}", "messages", "w") for k in range(2)]
    told = Counter("user", "http", "u1", "told:messages", "w")

    def worker(k: int) -> tuple[int, int]:
        won = firsts = 0
        for _ in range(tries):
            checks = [Check(user, slots), Check(chats[k % 2], 1000)]
            if k % 2:
                checks.reverse()
            if state.take(checks) is None:
                won += 1
            elif state.first_time(told):
                firsts += 1
        return won, firsts

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(worker, range(threads)))
    assert sum(w for w, _ in results) == slots
    assert sum(f for _, f in results) == 1
    assert state.count(user) == slots
    assert state.count(chats[0]) + state.count(chats[1]) == slots
    assert state.count(told) == threads * tries - slots  # every refusal counted, one told


def test_take_is_exact_under_concurrent_sqlite_connections(tmp_path):
    storage = Storage(f"sqlite:///{tmp_path / 'bot.db'}")
    storage.create_tables()
    race_for_slots(storage.chat_state)
    storage.engine.dispose()


def test_refused_take_counts_nothing_and_names_the_first_failing_check(tmp_path):
    storage = Storage(f"sqlite:///{tmp_path / 'bot.db'}")
    storage.create_tables()
    state = storage.chat_state
    a = Counter("user", "http", "u1", "messages", "w")
    b = Counter("chat", "http", "c1", "messages", "w")
    tokens = Counter("user", "http", "u1", "tokens", "w")
    state.add([tokens], 100)
    assert state.take([Check(a, 5), Check(b, 5)]) is None
    over = Check(tokens, 100, 0)
    assert state.take([Check(b, 5), Check(a, 5), over]) is over
    assert (state.count(a), state.count(b)) == (1, 1)  # the refused take rolled back
    assert state.take([Check(b, 1), Check(a, 5)]).counter == b  # in the given order
    assert (state.count(a), state.count(b)) == (1, 1)
    storage.engine.dispose()
