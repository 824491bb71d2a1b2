"""docs/reference/config.md is the page the settings models generate, and it lists every key
config.yaml.template and `chatfn init`'s config show (issue 39 §2, "Reference generated from
the code")."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from chatfn.common.config import DEPRECATED, Section
from chatfn.docs_reference import (
    Entry,
    entries,
    main,
    render,
    render_http_api,
    settings_model,
    type_name,
)
from tests.test_template import _normalise, schema_paths, template_paths

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "config.md"
HINT = "run `python -m chatfn.docs_reference --write`"


def test_the_page_is_the_generated_one() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        f"docs/reference/config.md differs from the settings models: {HINT}"
    )


def _missing(config_text: str) -> list[str]:
    schema = schema_paths(settings_model())
    page = PAGE.read_text(encoding="utf-8")
    shown = {_normalise(p, schema) for p in template_paths(config_text)} - {None}
    # `models.*` (a name of the user's) is the row of `models`, the mapping.
    keys = {p.removesuffix(".*") for p in shown if p is not None}
    return sorted(p for p in keys if f"| `{p}` |" not in page)


def test_every_template_key_is_on_the_page() -> None:
    text = (ROOT / "config.yaml.template").read_text(encoding="utf-8")
    assert "bot.history_size" in {e.path for e in entries()}
    assert _missing(text) == [], HINT


def test_every_key_chatfn_init_writes_is_on_the_page(tmp_path: Path) -> None:
    from chatfn.init import init

    init(tmp_path)
    written = (tmp_path / "config.yaml").read_text(encoding="utf-8")
    assert _missing(written) == [], HINT


def test_a_key_missing_from_the_page_is_seen() -> None:
    """The checks above could pass by seeing nothing: a key the page lacks shows."""
    text = (ROOT / "config.yaml.template").read_text(encoding="utf-8")
    assert _missing(text.replace("  history_size: 20", "  histroy_size: 20")) == [
        "bot.histroy_size"
    ]


class _Inner(Section):
    """Where the inner things go.

    Not this paragraph."""

    # How many, at most.
    count: int = Field(default=3, ge=0)


class _Sample(Section):
    # The name: a comment
    # over two lines.
    name: str = "x"
    described: float = Field(default=1.5, description="From the description.")
    inner: _Inner = Field(default_factory=_Inner)
    by_key: dict[str, _Inner] = Field(default_factory=dict)
    old: bool = Field(default=False, json_schema_extra=DEPRECATED)
    # Stays out of the page.
    hidden: int = Field(default=0, exclude=True)
    bare: list[str] | None = None


def test_meaning_type_default_and_deprecation_come_from_the_model() -> None:
    got = {e.path: e for e in entries(_Sample)}
    assert list(got) == [
        "name",
        "described",
        "inner",
        "inner.count",
        "by_key",
        "by_key.*.count",
        "old",
        "bare",
    ]
    assert got["name"].meaning == "The name: a comment over two lines."
    assert got["described"].meaning == "From the description."
    assert got["inner"].meaning == "Where the inner things go."
    assert got["inner.count"].meaning == "How many, at most."
    assert (got["inner.count"].type, got["inner.count"].default) == ("int", "3")
    assert got["old"].deprecated and not got["name"].deprecated
    assert (got["bare"].type, got["bare"].default, got["bare"].meaning) == (
        "list[str] | null",
        "null",
        "",
    )
    page = render(entries(_Sample))
    assert "| `old` | bool | `false` | **Deprecated.** |" in page


def test_type_names() -> None:
    from typing import Literal

    from pydantic import SecretStr

    assert type_name(Literal["at", "never"]) == '"at" | "never"'
    assert type_name(SecretStr | None) == "secret | null"
    assert type_name(dict[str, BaseModel]) == "dict[str, section]"


def test_write_mode(tmp_path: Path) -> None:
    target = tmp_path / "sub"
    assert main(["--write", str(target)]) == 0
    assert (target / "config.md").read_text(encoding="utf-8") == render()
    assert (target / "http-api.md").read_text(encoding="utf-8") == render_http_api()


def test_the_http_api_page_is_the_generated_one() -> None:
    page = (ROOT / "docs" / "reference" / "http-api.md").read_text(encoding="utf-8")
    assert page == render_http_api(), f"docs/reference/http-api.md differs: {HINT}"
    for route in ("POST /v1/messages", "GET /v1/events", "GET /healthz", "GET /v1/openapi.json"):
        assert f"## `{route}`" in page


def test_the_cli_page_is_the_generated_one_and_has_every_command() -> None:
    from chatfn.reference_pages import render_cli

    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page == render_cli(), f"docs/reference/cli.md differs: {HINT}"
    for command in ("run", "check", "migrate", "init", "admin", "login", "plugin", "replay"):
        assert f"## `chatfn {command}`" in page
    assert "## `chatfn plugin install`" in page  # subcommands of subcommands too
    assert "--role {gateway,worker}" in page or "--role" in page


def test_the_metrics_page_is_the_generated_one_and_lists_what_metrics_serves() -> None:
    from chatfn.common.metrics import Metrics
    from chatfn.reference_pages import render_metrics

    page = (ROOT / "docs" / "reference" / "metrics.md").read_text(encoding="utf-8")
    assert page == render_metrics(), f"docs/reference/metrics.md differs: {HINT}"
    served = Metrics().render()[0].decode()
    names = {line.split()[2] for line in served.splitlines() if line.startswith("# TYPE ")}
    assert names, served
    for name in names:  # every family /metrics serves has its row
        assert f"`{name}" in page, name


def _unexplained(items: list[Entry]) -> list[str]:
    """Keys the page shows with no meaning, outside `channels.*` (a few channels' keys are
    still unexplained)."""
    return [e.path for e in items if not e.meaning and not e.path.startswith("channels.")]


def test_every_core_and_plugin_key_has_a_meaning() -> None:
    """The page is read for what a key does: a key of the core's sections, `models:` or a
    built-in plugin without a comment above it (or a description) would show an empty cell."""
    assert _unexplained(entries()) == [], (
        "write a comment line above each of these fields (docs_reference reads it), then " + HINT
    )
    blank = Entry("bot.new_key", "int", "1", "", deprecated=False, section=False)
    assert _unexplained([blank]) == ["bot.new_key"]
