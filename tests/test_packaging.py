"""The distribution holds the project: a wheel and an sdist built from this tree contain every
module, migration, template and static file of the packages (the wheel) and every file of the
tree (the sdist), so a module left out fails here and not in a user's `pip install`. Also: the
version lives in one place, and `all` holds every runtime extra.

The build runs from a copy of the tree's files (as a clean clone has them), without build
isolation: setuptools comes from the `test` extra, so no network is needed.
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from chatfn.common.version import __version__

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = {"tests"}  # packages of the tree that are not part of the distribution
SKIP_PARTS = {"__pycache__", ".git", ".pytest_cache", ".ruff_cache", ".hypothesis", "build"}


def tree_files(root: Path = ROOT) -> list[str]:
    """The files a clean clone has: git's list (tracked, plus new files not ignored) when this is
    a checkout, else every file but caches and build output."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        out = [
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file()
            and not SKIP_PARTS & set(p.relative_to(root).parts)
            and not any(part.endswith(".egg-info") for part in p.parts)
        ]
    return sorted(f for f in out if (root / f).is_file() and not f.endswith((".pyc", ".pyo")))


def shipped(files: list[str]) -> set[str]:
    """What the wheel must hold: every file under a top-level package (a folder with an
    __init__.py), found from the tree, not from pyproject.toml. Top-level modules (bot.py,
    check_system.py) are the checkout's commands, not part of the distribution."""
    packages = {f.split("/")[0] for f in files if f.count("/") == 1 and f.endswith("/__init__.py")}
    packages -= NOT_SHIPPED
    return {f for f in files if f.split("/")[0] in packages}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, Path]:
    files = tree_files()
    work = tmp_path_factory.mktemp("dist")
    src, out = work / "src", work / "out"
    for rel in files:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel, follow_symlinks=False)  # as a clone has them
    out.mkdir()
    # (build_wheel rewrites sys.argv, hence `out` first)
    code = (
        "import sys; from setuptools import build_meta as b; "
        "out = sys.argv[1]; b.build_wheel(out); b.build_sdist(out)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return files, wheel, sdist


def test_the_wheel_holds_every_module_and_data_file_of_the_packages(
    built: tuple[list[str], Path, Path],
) -> None:
    files, wheel, _ = built
    with zipfile.ZipFile(wheel) as zf:
        names = {n for n in zf.namelist() if ".dist-info/" not in n}
    expected = shipped(files)
    assert expected - names == set(), "left out of the wheel (pyproject.toml package-data?)"
    assert names - expected == set(), "in the wheel but not a file of the packages"
    # The ones issue 20 found missing, and the kinds of data file, by name.
    for must in (
        "chatfn/common/i18n/__init__.py",
        "function_calls/builtins/chat_admin/functions.py",
        "chatfn/storage/migrations/script.py.mako",
        "chatfn/storage/migrations/versions/0001_baseline.py",
        "chatfn/templates/config.yaml.template",
        "chatfn/templates/plugins/example.py",
    ):
        assert must in names
    assert any(n.startswith("chatfn/channels/") and n.endswith("/static/index.html") for n in names)
    # Exactly three top-level names in site-packages: nothing generic (channels, storage, ...)
    # that another distribution could also write into.
    assert {n.split("/")[0] for n in names} == {"chatfn", "function_calls", "providers"}
    with zipfile.ZipFile(wheel) as zf:  # the init templates as files, not links
        for name in TEMPLATES:
            assert zf.read(f"chatfn/templates/{name}") == (ROOT / name).read_bytes()


def test_the_wheel_metadata_has_the_version_licence_and_entry_points(
    built: tuple[list[str], Path, Path],
) -> None:
    _, wheel, _ = built
    assert wheel.name == f"chatfn-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        info = f"chatfn-{__version__}.dist-info"
        meta = email.message_from_bytes(zf.read(f"{info}/METADATA"))
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        assert f"{info}/licenses/LICENSE" in zf.namelist()
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "MIT"
    assert "[pytest11]" in entry_points
    assert "[console_scripts]\nchatfn = chatfn.cli:main" in entry_points
    # Base requirements carry no driver a single SQLite process does not use.
    base = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert not [r for r in base if r.startswith(("psycopg", "aio-pika"))], base


def test_the_sdist_holds_the_whole_tree(built: tuple[list[str], Path, Path]) -> None:
    files, _, sdist = built
    top = f"chatfn-{__version__}/"
    with tarfile.open(sdist) as tf:
        names = {m.name.removeprefix(top) for m in tf.getmembers() if m.isfile() or m.issym()}
    wanted = {f for f in files if f != ".gitignore"}
    assert wanted - names == set(), "left out of the sdist (MANIFEST.in?)"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_a_file_outside_the_globs_is_caught(tmp_path: Path) -> None:
    """The comparison itself: a module in a new subpackage and a new static file count."""
    files = [
        "chatfn/__init__.py",
        "chatfn/channels/new/__init__.py",
        "chatfn/channels/new/static/app.js",
        "tests/__init__.py",
        "tests/test_x.py",
        "docs/x.md",
        "bot.py",
    ]
    assert shipped(files) == {
        "chatfn/__init__.py",
        "chatfn/channels/new/__init__.py",
        "chatfn/channels/new/static/app.js",
    }


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_all_holds_every_runtime_extra() -> None:
    extras = pyproject()["project"]["optional-dependencies"]
    runtime = {n: reqs for n, reqs in extras.items() if n not in ("all", "test", "docs")}
    assert {"postgres", "rabbitmq"} <= set(runtime)
    every = {r for reqs in runtime.values() for r in reqs}
    assert set(extras["all"]) == every


def test_sdks_whose_private_parts_the_channels_drive_have_an_upper_bound() -> None:
    # the Discord channel overrides discord.py's Client._get_state; the Feishu channel drives
    # lark-oapi's ws client's _connect/_ping_loop/_disconnect and transport's _build_url
    from packaging.requirements import Requirement

    extras = pyproject()["project"]["optional-dependencies"]
    pinned = {"discord-py", "lark-oapi"}
    found = 0
    for reqs in extras.values():
        for text in reqs:
            req = Requirement(text)
            if req.name.lower().replace(".", "-") in pinned:
                found += 1
                assert any(s.operator in ("<", "<=", "==") for s in req.specifier), text
    assert found >= 5  # discord, feishu, all (both) and test (lark-oapi)


def test_the_version_is_kept_in_one_place() -> None:
    project = pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "chatfn.common.version.__version__"
    }
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {__version__}" in changelog


# chatfn init's files, and the project's plugin index (plugins.index_url's default) with its
# schema: package data, each a link to the repository's file.
TEMPLATES = (
    "config.yaml.template",
    "plugins/example.py",
    "plugins/index.json",
    "plugins/index.schema.json",
)


@pytest.mark.parametrize("name", TEMPLATES)
def test_chatfn_init_writes_the_repository_files(name: str) -> None:
    """`chatfn init`'s templates are package data, and the repository's files are their one
    source (README's "copy config.yaml.template" route): chatfn/templates/ holds symbolic links
    to them, which the wheel turns into files."""
    shipped_copy = ROOT / "chatfn" / "templates" / name
    assert shipped_copy.read_bytes() == (ROOT / name).read_bytes(), (
        f"chatfn/templates/{name} differs from {name}: it should be a link to it"
    )
