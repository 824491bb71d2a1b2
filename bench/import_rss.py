"""What each import adds to a process's memory: modules imported one group after another in a
fresh interpreter, with the RSS after each (`/proc/self/statm`), so each group is charged only
for what the groups before it had not loaded yet.

    python bench/import_rss.py                          # the bot's imports, in start-up order
    python bench/import_rss.py asyncio+ssl openai       # any groups (`+` joins modules)

The default order follows the benchmark bot's (bench/bench_startup.py): the standard library's
asyncio stack, the libraries, then chatfn's own modules, then what the first messages load (the
openai SDK and the HTTP stack it imports on its first request). RSS deltas depend on the order
(shared dependencies are charged to the first group that needs them) and vary by ~0.1 MB.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEFAULT = [
    "asyncio+ssl+socket+concurrent.futures",
    "pydantic",
    "loguru",
    "yaml",
    "sqlalchemy+sqlalchemy.dialects.sqlite+sqlite3",
    "aiohttp",
    "aiohttp.web",
    "apscheduler.triggers.cron+apscheduler.triggers.date+apscheduler.triggers.combining",
    "common.config+common.i18n",
    "chatfn.storage.db",
    "function_calls",
    "chatfn.runtime.bot",
    "chatfn.channels.http.channel",
    "function_calls.builtins.reminders+function_calls.builtins.summary"
    "+function_calls.builtins.web_search+function_calls.builtins.chat_admin"
    "+function_calls.builtins.welcome+function_calls.builtins.help",
    "providers.openai_compat",
    "openai",
    "httpcore2",
]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1048576


def main(groups: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    before = rss_mb()
    print(f"{'interpreter':70s} {before:6.1f} MB")
    for group in groups:
        for name in group.split("+"):
            importlib.import_module(name)
        now = rss_mb()
        print(f"{group[:70]:70s} {now:6.1f} MB  +{now - before:4.1f}")
        before = now
    print(f"trio loaded: {'trio' in sys.modules}")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
