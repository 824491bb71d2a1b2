"""The capability table in docs/channels.md is the one the channels' declarations generate,
and every channel chatfn ships declares its row (issue 42, "A capability table, generated")."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatfn.capabilities import BEGIN, END, main, render, replace_block
from chatfn.runtime.channel_caps import COLUMNS, Capabilities
from chatfn.runtime.channel_host import ChannelSpec
from chatfn.runtime.channel_registry import BUILTIN, find_channels

DOCS = Path(__file__).resolve().parents[2] / "docs" / "channels.md"


def test_every_own_channel_declares_its_capabilities() -> None:
    found = find_channels()
    missing = [n for n in BUILTIN if n in found.specs and found.specs[n].capabilities is None]
    assert missing == [], f"channels without capabilities=: {missing}"


@pytest.mark.parametrize("doc", [DOCS, DOCS.parents[1] / "README.md"], ids=["docs", "readme"])
def test_the_table_in_the_docs_is_the_generated_one(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert text == replace_block(text, render()), (
        f"{doc.name}'s capability table differs from the channels' declarations: "
        "run `python -m chatfn.capabilities --write`"
    )


def test_a_changed_declaration_changes_its_row() -> None:
    spec = find_channels().specs["telegram"]
    before = render({"telegram": spec})
    changed = ChannelSpec(
        name="telegram",
        settings=spec.settings,
        factory=spec.factory,
        capabilities=Capabilities(dms=True, voice_in=True, connection=("webhook",)),
    )
    after = render({"telegram": changed})
    assert before != after
    row = after.splitlines()[2].strip("| ").split(" | ")
    assert row[0] == "`telegram`"
    cells = dict(zip(COLUMNS, row[1:], strict=True))
    assert cells["voice in"] == "✓" and cells["groups"] == "–"
    assert cells["connection"] == "webhook"


def test_write_replaces_only_the_block(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\nbefore\n\n{BEGIN}\nstale\n{END}\n\nafter\n", encoding="utf-8")
    assert main(["--write", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\nbefore\n\n") and text.endswith(f"{END}\n\nafter\n")
    assert "stale" not in text and "| `telegram` |" in text


def test_write_without_markers_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.md"
    page.write_text("# nothing here\n", encoding="utf-8")
    assert main(["--write", str(page)]) == 1
    assert "markers" in capsys.readouterr().err
    assert page.read_text(encoding="utf-8") == "# nothing here\n"
