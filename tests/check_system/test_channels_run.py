"""`channels.run` (issue 39, "No surprises"): the channels `chatfn run` starts when no
`--channel` is given, and the ones `chatfn check` holds to account: a channel that will run,
or whose section holds credentials, fails the check when its platform refuses them (a ✗ and
"NOT ready"), instead of a warning."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chatfn.run import _channel_names
from chatfn.runtime.settings import ConfigError, parse_settings
from tests.channels.telegram.telegram_fake import FakeTelegram
from tests.check_system.test_check_system import BASE, by_name, run


def _args(*channels: str, role: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(channel=list(channels) or None, role=role)


def test_run_names_the_channels_and_the_flag_overrides_it(tmp_path: Path) -> None:
    settings = parse_settings({"channels": {"run": ["http", "kook", "http"]}}, base_dir=tmp_path)
    assert settings.channels.run == ["http", "kook"]
    assert _channel_names(_args(), settings) == ["http", "kook"]
    assert _channel_names(_args("console"), settings) == ["console"]
    assert _channel_names(_args(), parse_settings({}, base_dir=tmp_path)) == ["console"]
    with pytest.raises(ConfigError, match=r"channels\.run: .*no installed channel named nosuch"):
        parse_settings({"channels": {"run": ["http", "nosuch"]}}, base_dir=tmp_path)


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def test_a_refused_token_fails_the_check_for_a_channel_in_run(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    wrong = f"channels:\n  telegram: {{token: '999:wrong', base_url: '{telegram.base_url}'}}\n"
    # the token is written: the operator means to use it, with or without channels.run
    for config in (BASE + wrong, BASE + wrong + "  run: [telegram]\n"):
        code, report = await asyncio.to_thread(run, tmp_path, config, "--online")
        assert code == 1 and not report["ok"]
        probe = by_name(report)["channel telegram getMe"]
        assert probe["status"] == "fail" and "refused" in probe["detail"].lower()
    good = (
        f"channels:\n  telegram: {{token: '{telegram.token}', base_url: '{telegram.base_url}'}}\n"
    )
    config = BASE + good + "  run: [telegram]\n"
    code, report = await asyncio.to_thread(run, tmp_path, config, "--online")
    assert by_name(report)["channel telegram getMe"]["status"] == "ok"


def test_a_channel_without_credentials_not_in_run_only_warns(tmp_path: Path) -> None:
    # a section without a secret, for a channel this process does not run: a warning
    code, report = run(tmp_path, BASE + "channels:\n  kook: {compress: true}\n")
    kook = [c for c in report["checks"] if c["name"].startswith("channel kook")]
    assert kook and all(c["status"] == "warn" for c in kook), kook
    code, report = run(tmp_path, BASE + "channels:\n  kook: {compress: true}\n  run: [kook]\n")
    assert code == 1 and any(
        c["status"] == "fail" for c in report["checks"] if c["name"].startswith("channel kook")
    )
