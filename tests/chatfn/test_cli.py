"""The `chatfn` command (issue 20 §2): `chatfn init && chatfn` in an empty folder, init never
overwriting, its config starting with no model and saying where the key goes, `--version`,
`check` and `migrate` subcommands, and flags alone meaning `run`.

Subprocesses run `python -m chatfn` (what the console script calls) with the checkout first on
the path, from an empty folder: nothing of the checkout's plugins/ or config.yaml is visible.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chatfn.common.version import __version__
from chatfn.init import KEY_NOTE, init, without_model
from chatfn.runtime.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    out.pop("CHATFN_MODEL", None)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), out.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return out


def chatfn(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chatfn", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env(),
        timeout=60,
    )


def test_init_then_chatfn_in_an_empty_folder(tmp_path: Path) -> None:
    written = chatfn(tmp_path, "init")
    assert written.returncode == 0, written.stderr
    assert "wrote config.yaml" in written.stdout and "wrote plugins/example.py" in written.stdout
    console = chatfn(tmp_path, stdin="/help\n/roll_dice count=2\n")
    assert console.returncode == 0, console.stderr
    assert "/roll_dice" in console.stdout and "🎲 2d6:" in console.stdout, console.stdout
    assert "no model configured" in console.stderr  # no key set: slash commands only
    assert (tmp_path / "data" / "chatfn.db").is_file()  # the folder's own database
    check = chatfn(tmp_path, "check", "--json")
    assert check.returncode == 0, check.stdout
    checks = {c["name"]: c for c in json.loads(check.stdout)["checks"]}
    assert checks["model"]["status"] == "warn"
    assert "roll_dice" in checks["function schemas"]["detail"]
    migrate = chatfn(tmp_path, "migrate")
    assert (migrate.returncode, "nothing to run" in migrate.stdout) == (0, True), migrate.stdout


def test_init_never_overwrites_and_says_what_it_skipped(tmp_path: Path) -> None:
    mine = "bot:\n  name: mine\n"
    (tmp_path / "config.yaml").write_text(mine)
    lines = init(tmp_path)
    assert lines == [
        f"skipped {tmp_path / 'config.yaml'}: it exists (left as it is)",
        f"wrote {tmp_path / 'plugins' / 'example.py'}",
    ]
    assert (tmp_path / "config.yaml").read_text() == mine
    (tmp_path / "plugins" / "example.py").write_text("# my own\n")
    assert all(line.startswith("skipped") for line in init(tmp_path))
    assert (tmp_path / "plugins" / "example.py").read_text() == "# my own\n"


def test_the_init_config_has_no_model_and_says_where_the_key_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CHATFN_MODEL"):
        monkeypatch.delenv(var, raising=False)
    init(tmp_path)
    text = (tmp_path / "config.yaml").read_text(encoding="utf-8")
    assert "YOUR KEY GOES HERE" in text and "#     api_key: ${OPENAI_API_KEY}" in text
    assert load_settings(tmp_path / "config.yaml").models == {}
    # With the key in the environment, the model is there, as without a config file.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert list(load_settings(tmp_path / "config.yaml").models) == ["default"]
    # Removing the "# " in front of each line of the block gives the template back.
    template = (ROOT / "config.yaml.template").read_text(encoding="utf-8")
    lines = text.replace(KEY_NOTE, "").splitlines(keepends=True)
    start = lines.index("# models:\n")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("bot:"))
    block = [line.removeprefix("# ") for line in lines[start:end]]
    assert "".join(lines[:start] + block + lines[end:]) == template
    assert without_model(template) == text


def test_version_is_printed_by_chatfn_and_bot_py(tmp_path: Path) -> None:
    assert chatfn(tmp_path, "--version").stdout == f"chatfn {__version__}\n"
    bot = subprocess.run(
        [sys.executable, str(ROOT / "bot.py"), "--version"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert bot.stdout == f"chatfn {__version__}\n"


def test_flags_alone_run_the_bot_and_a_wrong_command_is_named(tmp_path: Path) -> None:
    (tmp_path / "bot.yaml").write_text("bot:\n  name: flagbot\n")
    run = chatfn(tmp_path, "--config", "bot.yaml", "--channel", "console", stdin="/help\n")
    assert run.returncode == 0, run.stderr
    assert "config " + str(tmp_path / "bot.yaml") in run.stderr
    wrong = chatfn(tmp_path, "start")
    assert wrong.returncode == 2
    assert "invalid choice: 'start'" in wrong.stderr


def test_a_config_error_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("storage:\n  uri: x\n")
    done = chatfn(tmp_path, "run")
    assert done.returncode == 2
    assert done.stderr.startswith("chatfn: ") and "storage.uri: unknown key" in done.stderr
