"""Paths in a config file are relative to that file's folder, whatever the current folder, and
the start-up line says which config, database and plugin folders the bot really uses."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import yaml

from chatfn.runtime.settings import load_settings, parse_settings
from tests.bot.conftest import PYTHON, ROOT

CONFIG = {
    "plugins": {"paths": ["plugins"]},
    "storage": {"url": "sqlite:///data/bot.db"},
    "logging": {"file": "logs/bot.log"},
}


def run_bot(cwd: Path, config: str, lines: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CHATFN_"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [PYTHON, str(ROOT / "bot.py"), "--config", config],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )


def test_config_elsewhere_keeps_its_plugins_database_and_log(tmp_path: Path) -> None:
    elsewhere, cwd = tmp_path / "elsewhere", tmp_path / "cwd"
    (elsewhere / "plugins").mkdir(parents=True)
    cwd.mkdir()
    shutil.copy(ROOT / "plugins" / "example.py", elsewhere / "plugins" / "dice.py")
    (elsewhere / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    for _run in (1, 2):  # the second start finds the first one's history
        proc = run_bot(cwd, "../elsewhere/config.yaml", ["/roll_dice count=2"])
        assert proc.returncode == 0, proc.stderr
        assert "🎲 2d6" in proc.stdout, proc.stdout + proc.stderr
    assert list(cwd.iterdir()) == []  # nothing written where the bot was started
    with sqlite3.connect(elsewhere / "data" / "bot.db") as db:
        (stored,) = db.execute("select count(*) from messages where role = 'user'").fetchone()
    assert stored == 2
    log = (elsewhere / "logs" / "bot.log").read_text()
    started = [line for line in log.splitlines() if "chatfn started" in line]
    assert len(started) == 2
    assert f"config {elsewhere / 'config.yaml'}" in started[0]
    assert f"database sqlite:///{elsewhere / 'data' / 'bot.db'}" in started[0]
    assert f"plugins {elsewhere / 'plugins'} (1 plugin(s), 1 function(s))" in started[0]


def test_every_path_setting_is_taken_from_the_config_folder(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    (config.parent / "plugins").mkdir()
    (tmp_path / "abs").mkdir()
    data = {
        **CONFIG,
        "mcp": {"servers": {"tools": {"command": "srv", "cwd": "servers/tools"}}},
        "plugins": {"paths": ["plugins", str(tmp_path / "abs")]},
    }
    config.write_text(yaml.safe_dump(data))
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        settings = load_settings("conf/config.yaml")
    finally:
        os.chdir(cwd)
    base = config.parent
    assert settings.config_file == config
    assert settings.plugins.paths == [str(base / "plugins"), str(tmp_path / "abs")]
    assert settings.logging.file == str(base / "logs" / "bot.log")
    assert settings.storage.url == f"sqlite:///{base / 'data' / 'bot.db'}"
    assert settings.mcp.servers["tools"].cwd == str(base / "servers" / "tools")  # type: ignore[attr-defined]
    # Without a config file: the current folder, and a path the user did not set is untouched
    # in `model_fields_set` (a resolved path is not a setting the user made).
    plain = parse_settings({"plugins": {"paths": []}}, base_dir=tmp_path)
    assert plain.config_file is None
    assert plain.storage.url == f"sqlite:///{tmp_path / 'data' / 'chatfn.db'}"
    assert "storage" not in plain.model_fields_set


def test_the_start_up_line_hides_the_database_password(tmp_path: Path) -> None:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.startup import startup_line
    from chatfn.storage.db import Storage

    url = "postgresql+psycopg://bot:hunter22@127.0.0.1:1/chat"  # never connected to here
    settings = parse_settings({"plugins": {"paths": []}, "storage": {"url": url}}, tmp_path)
    bot = Bot(settings, storage=Storage(url), migrate=False, builtins=False)
    line = startup_line(bot, "single process", ["console"])
    assert "database postgresql+psycopg://bot:***@127.0.0.1:1/chat" in line
    assert "hunter22" not in line
    assert f"config none (defaults, paths from {tmp_path})" in line
