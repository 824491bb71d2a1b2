"""build_model: adapter choice, native_tools defaults, missing SDK extras, prompt-tools wrapping.

Other engineers' modules (providers.anthropic, providers.gemini, providers.text_tools.*) are
replaced by stand-ins in sys.modules, so these tests check the factory's wiring only."""

from __future__ import annotations

import sys
import types

import pytest

from providers.config import ModelConfig
from providers.errors import ProviderAuthError, ProviderNotInstalled
from providers.factory import build_model, default_native_tools
from providers.openai_compat import OpenAICompatModel


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def cfg(**kw: object) -> ModelConfig:
    kw.setdefault("model", "gpt-4o-mini")
    kw.setdefault("api_key", "k")
    return ModelConfig(**kw)


class Wrapper:
    def __init__(self, inner: object) -> None:
        self.inner = inner


def fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **attrs: object) -> None:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        (None, True),
        ("https://api.openai.com/v1", True),
        ("https://api.deepseek.com", "auto"),
        ("http://127.0.0.1:11434/v1", "auto"),
    ],
)
def test_default_native_tools_by_base_url(base_url: str | None, expected: object) -> None:
    assert default_native_tools(cfg(base_url=base_url)) == expected


def test_explicit_native_tools_wins_and_env_base_url_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert default_native_tools(cfg(native_tools=False)) is False
    assert default_native_tools(cfg(base_url="http://localhost/v1", native_tools=True)) is True
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    assert default_native_tools(cfg()) == "auto"
    assert default_native_tools(cfg(provider="anthropic", model="claude")) is True


def test_openai_itself_is_native_and_unwrapped() -> None:
    model = build_model("default", cfg())
    assert isinstance(model, OpenAICompatModel)
    assert model.capabilities.native_tools is True and model.name == "default"


def test_openai_without_key_fails_at_build() -> None:
    with pytest.raises(ProviderAuthError, match="OPENAI_API_KEY"):
        build_model("default", cfg(api_key=None))
    # A local server needs no key.
    assert build_model("local", cfg(api_key=None, base_url="http://127.0.0.1:1/v1"))


def test_prompt_tools_and_auto_are_wrapped() -> None:
    from providers.text_tools.downgrade import AutoToolsModel
    from providers.text_tools.model import TextToolsModel

    prompt = build_model("p", cfg(native_tools=False))
    assert isinstance(prompt, TextToolsModel) and isinstance(prompt.inner, OpenAICompatModel)
    assert prompt.inner.capabilities.native_tools is False
    auto = build_model("a", cfg(base_url="http://127.0.0.1:1/v1"))
    assert isinstance(auto, AutoToolsModel) and auto.inner.capabilities.native_tools == "auto"
    native = build_model("n", cfg(base_url="http://127.0.0.1:1/v1", native_tools=True))
    assert isinstance(native, OpenAICompatModel)


@pytest.mark.parametrize(
    ("provider", "sdk", "extra"),
    [
        ("anthropic", "anthropic", "anthropic"),
        ("gemini", "google.genai", "gemini"),
    ],
)
def test_missing_sdk_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, provider: str, sdk: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, sdk, None)
    with pytest.raises(ProviderNotInstalled) as info:
        build_model("claude", cfg(provider=provider, model="m"))
    message = str(info.value)
    assert f'pip install "chatfn[{extra}]"' in message
    assert f'pip install ".[{extra}]"' in message
    assert "'claude'" in message


@pytest.mark.parametrize(
    ("provider", "module", "cls"),
    [
        ("anthropic", "providers.anthropic", "AnthropicModel"),
        ("gemini", "providers.gemini", "GeminiModel"),
    ],
)
def test_other_providers_use_their_adapter(
    monkeypatch: pytest.MonkeyPatch, provider: str, module: str, cls: str
) -> None:
    calls = []

    class Fake:
        def __init__(self, name: str, config: ModelConfig) -> None:
            calls.append((name, config.provider))

    fake_module(monkeypatch, module, **{cls: Fake})
    assert isinstance(build_model("x", cfg(provider=provider, model="m")), Fake)
    assert calls == [("x", provider)]


def test_scripted_is_not_a_config_provider() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="provider"):
        cfg(provider="scripted")


def test_openai_model_is_built_without_importing_the_sdk() -> None:
    """Building the model (at start) leaves `import openai` to prepare() or the first request;
    prepare() makes the client through a wrapper too."""
    import subprocess
    from pathlib import Path

    code = (
        "import sys\n"
        "from providers.config import ModelConfig\n"
        "from providers.factory import build_model\n"
        "m = build_model('m', ModelConfig(provider='openai', model='x', api_key='k',"
        " base_url='http://127.0.0.1:9/v1', native_tools='auto'))\n"
        "print('openai' in sys.modules)\n"
        "m.prepare()\n"
        "print('openai' in sys.modules, type(m.inner._client).__name__)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.split() == ["False", "True", "AsyncOpenAI"], out.stdout + out.stderr
