"""The plugin market's index format (issue 37, section 4): plugins/index.schema.json describes
it, and the project's own index, plugins/index.json, is valid against it and lists every plugin
the repository ships as an example with the true sha256 of its file, its chatfn range (which
holds this version) and the permissions its source declares."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from chatfn.runtime.plugin_pip import declared
from chatfn.runtime.plugins import supports
from chatfn.runtime.settings import parse_settings

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def load(name: str) -> Any:
    return json.loads((PLUGINS / name).read_text(encoding="utf-8"))


def errors(index: Any) -> list[str]:
    schema = load("index.schema.json")
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [e.message for e in validator.iter_errors(index)]


def test_the_schema_is_a_valid_json_schema() -> None:
    Draft202012Validator.check_schema(load("index.schema.json"))


def test_the_projects_index_is_valid_and_true_to_the_files() -> None:
    index = load("index.json")
    assert errors(index) == []
    listed: dict[str, dict[str, Any]] = {}
    for plugin in index["plugins"]:
        for version in plugin["versions"]:
            assert supports(version["chatfn"])
            for file in version["files"]:
                if plugin["kind"] == "file":
                    listed[file["url"]] = version
                    data = (PLUGINS / file["url"]).read_bytes()
                    assert hashlib.sha256(data).hexdigest() == file["sha256"], file["url"]
                    perms, _ = declared(data.decode("utf-8"))
                    assert sorted(version.get("permissions", [])) == perms
    shipped = {p.name for p in PLUGINS.glob("*.py") if not p.name.startswith("_")}
    assert shipped and shipped <= set(listed)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda p: p["versions"][0]["files"][0].update(sha256="abc"), "does not match"),
        (lambda p: p.update(kind="package"), "'distribution' is a required property"),
        (lambda p: p["versions"][0].update(permissions=["root"]), "is not one of"),
        (lambda p: p.update(name="Bad Name"), "does not match"),
        (lambda p: p.pop("versions"), "'versions' is a required property"),
        (
            lambda p: p["versions"][0]["files"].append({"filename": "b.py", "sha256": "0" * 64}),
            "is too long",
        ),
        (lambda p: p["versions"][0]["files"][0].update(filename="../x.py"), "does not match"),
    ],
)
def test_the_schema_refuses_what_an_install_could_not_trust(change: Any, expected: str) -> None:
    index = copy.deepcopy(load("index.json"))
    change(index["plugins"][0])
    assert any(expected in e for e in errors(index))


def test_the_index_settings(tmp_path: Path) -> None:
    settings = parse_settings(
        {
            "plugins": {
                "paths": [],
                "index_url": "https://example.org/index.json",
                "package_index": "https://pypi.example/simple",
            }
        },
        tmp_path,
    )
    assert settings.plugins.index_url == "https://example.org/index.json"
    assert settings.plugins.package_index == "https://pypi.example/simple"
    assert parse_settings({"plugins": {"paths": []}}, tmp_path).plugins.index_url is None


def test_unset_the_index_is_the_projects_own_as_chatfn_ships_it() -> None:
    """plugins.index_url's default, for the console and the command line alike: the copy in
    the installed package (read offline), the repository's plugins/index.json."""
    from chatfn.runtime.plugin_index import index_in_use, own_index, read_index

    assert own_index().read_bytes() == (PLUGINS / "index.json").read_bytes()
    assert index_in_use(None) == str(own_index())
    assert index_in_use("https://example.org/i.json") == "https://example.org/i.json"
    assert read_index(index_in_use(None), Path("/nowhere")) == load("index.json")


@pytest.mark.parametrize(
    ("change", "where", "expected"),
    [
        (
            lambda p: p["versions"][0]["files"][0].update(sha256="abc"),
            "plugins[0].versions[0].files[0].sha256",
            "does not match",
        ),
        (lambda p: p.update(kind="package"), "plugins[0]", "'distribution' is a required"),
        (lambda p: p["versions"][0]["files"][0].update(filename="../x.py"), "filename", "match"),
    ],
)
def test_an_index_the_schema_refuses_is_refused_when_read_naming_where(
    tmp_path: Path, change: Any, where: str, expected: str
) -> None:
    """read_index checks the schema (the console's market and `chatfn plugin` read through it):
    a broken index is one error naming the index and the first bad place, not a half-read
    list."""
    from chatfn.runtime.plugin_index import PluginIndexError, read_index

    index = copy.deepcopy(load("index.json"))
    assert read_index(str(PLUGINS / "index.json"), tmp_path) == index
    change(index["plugins"][0])
    (tmp_path / "index.json").write_text(json.dumps(index))
    with pytest.raises(PluginIndexError) as raised:
        read_index("index.json", tmp_path)
    message = str(raised.value)
    assert message.startswith("plugins.index_url index.json: not a valid plugin index at ")
    assert where in message and expected in message, message
    (tmp_path / "index.json").write_text(json.dumps({"plugins": []}))  # no format
    with pytest.raises(PluginIndexError, match="'format' is a required property"):
        read_index("index.json", tmp_path)
