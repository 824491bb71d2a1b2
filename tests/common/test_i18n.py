"""The catalogues: every key in every language, with the same placeholders."""

from __future__ import annotations

import string

import pytest

from chatfn.common.i18n import CATALOGUES, LANGUAGES, catalogue, translate


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_key_exists_in_every_language(language: str) -> None:
    reference = set(CATALOGUES["en"])
    have = set(CATALOGUES[language])
    assert reference - have == set(), f"{language} lacks keys"
    assert have - reference == set(), f"{language} has keys English lacks"


@pytest.mark.parametrize("language", LANGUAGES)
def test_placeholders_match_english(language: str) -> None:
    for key, text in CATALOGUES[language].items():
        assert _fields(text) == _fields(CATALOGUES["en"][key]), key


def test_translate_formats_and_falls_back() -> None:
    assert translate("zh", "core.unknown_command", name="x").startswith("未知命令 /x")
    assert translate("fr", "core.unknown_command", name="x").startswith("Unknown command /x")
    with pytest.raises(KeyError):
        translate("en", "no.such.key")
    assert set(catalogue("zh", "web.")) == {k for k in CATALOGUES["en"] if k.startswith("web.")}
