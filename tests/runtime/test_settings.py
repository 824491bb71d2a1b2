"""Configuration: the template, the issue's minimal config, env substitution and fallbacks,
error messages, and secrets kept out of logs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic import BaseModel

from chatfn.common.config import is_deprecated
from chatfn.runtime.settings import ConfigError, load_settings, parse_settings

ROOT = Path(__file__).resolve().parents[2]

MINIMAL = """\
models:
  default:
    provider: openai
    base_url: http://127.0.0.1:8000/v1
    api_key: ${OPENAI_API_KEY}
    model: gpt-4o-mini
bot:
  admins: [alice]
plugins:
  paths: [plugins]
storage:
  url: sqlite:///data/chatfn.db
channels:
  http: {host: 127.0.0.1, port: 8080, token: "change-me"}
"""


def test_minimal_config_from_the_issue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abc")
    (tmp_path / "config.yaml").write_text(MINIMAL)
    s = load_settings(tmp_path / "config.yaml")
    m = s.models["default"]
    assert (m.provider, m.base_url, m.model) == (
        "openai",
        "http://127.0.0.1:8000/v1",
        "gpt-4o-mini",
    )
    assert m.api_key is not None and m.api_key.get_secret_value() == "sk-abc"
    assert "sk-abc" not in repr(s)
    assert s.bot.admins == ["alice"] and s.channels.http.token == "change-me"
    assert s.base_dir == tmp_path


def _field_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    paths = set()
    for name, field in model.model_fields.items():
        if field.exclude or is_deprecated(field):
            continue
        paths.add(prefix + name)
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            paths |= _field_paths(ann, prefix + name + ".")
    return paths


def test_template_is_valid_and_documents_every_option() -> None:
    text = (ROOT / "config.yaml.template").read_text()
    loaded = load_settings(ROOT / "config.yaml.template")
    # The class it was validated with: every plugin's section and every built-in channel's.
    fields = _field_paths(type(loaded))
    assert {"channels.onebot.access_token", "channels.http.webhook_url"} <= fields
    undocumented = [p for p in fields if f"{p.split('.')[-1]}:" not in text]
    assert undocumented == []
    from providers.config import ModelConfig

    assert [f for f in ModelConfig.model_fields if f"{f}:" not in text] == []


def test_env_substitution_with_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_NAME", "Jeeves")
    monkeypatch.delenv("UNSET_THING", raising=False)
    s = parse_settings(
        {
            "bot": {"name": "${BOT_NAME}", "system_prompt": "${UNSET_THING:-hi}"},
            "channels": {"http": {"token": "${UNSET_THING}"}},
        }
    )
    assert s.bot.name == "Jeeves" and s.bot.system_prompt == "hi"
    assert s.channels.http.token is None


def test_environment_defines_a_model_when_config_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CHATFN_MODEL"):
        monkeypatch.delenv(var, raising=False)
    assert parse_settings({}).models == {}
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("CHATFN_MODEL", "qwen2.5")
    m = parse_settings({}).models["default"]
    assert (m.base_url, m.model, m.api_key) == ("http://127.0.0.1:11434/v1", "qwen2.5", None)


@pytest.mark.parametrize(
    "data,expected",
    [
        ({"models": {"m": {"model": "x", "timeout": "soon"}}}, "models.m.timeout"),
        ({"models": {"m": {"model": "x", "provider": "cohere"}}}, "models.m.provider"),
        ({"models": {"m": {}}}, "models.m.model: Field required"),
        ({"function_calls": {"max_rounds": 0}}, "function_calls.max_rounds"),
        ({"bot": {"respond_in_groups": "sometimes"}}, "bot.respond_in_groups"),
        ({"channels": {"http": {"port": 99999}}}, "channels.http.port"),
        ({"storage": {"uri": "x"}}, "storage.uri: unknown key"),
    ],
)
def test_bad_values_name_key_path(data: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_settings(data)
    assert expected in str(exc.value)


def test_secret_in_bad_value_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_settings({"channels": {"http": {"token": ["sk-leaky-token"]}}})
    assert "sk-leaky-token" not in str(exc.value) and "channels.http.token" in str(exc.value)


def test_yaml_errors_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad)


def test_secrets_masked_in_logs() -> None:
    from loguru import logger

    from chatfn.runtime.logging import setup_logging

    s = parse_settings(
        {
            "models": {"m": {"model": "x", "api_key": "sk-supersecret-123"}},
            "channels": {"http": {"token": "tok-abcdef"}},
        }
    )
    sink = io.StringIO()
    setup_logging(s, stream=sink)
    logger.info("request failed with key sk-supersecret-123 and token tok-abcdef")
    logger.remove()
    out = sink.getvalue()
    assert "sk-supersecret-123" not in out and "tok-abcdef" not in out and "***" in out


def test_errors_name_the_key_and_chatfn_init_not_the_template(tmp_path: Path) -> None:
    """A wheel user has no config.yaml.template: errors point at `chatfn init` (issue 39)."""
    with pytest.raises(ConfigError) as unknown:
        parse_settings({"bot": {"histroy_size": 3}}, base_dir=tmp_path)
    assert "bot.histroy_size: unknown key" in str(unknown.value)
    assert "chatfn init" in str(unknown.value) and "template" not in str(unknown.value)
    with pytest.raises(ConfigError) as missing:
        load_settings(tmp_path / "nope.yaml")
    assert "chatfn init" in str(missing.value) and "template" not in str(missing.value)
