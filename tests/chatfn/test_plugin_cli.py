"""`chatfn plugin new | list | install | upgrade | remove` (issue 37, section 3), for real: pip
in a fresh virtual environment (`--system-site-packages`, so the chatfn under test is the one it
sees), from a folder of wheels the tests write (`plugins.package_index`: `--no-index
--find-links`; no network).

The skeleton `chatfn plugin new` writes is built into a wheel with pip, installed by `chatfn
plugin install`, and its own generated test passes in that environment. Synthetic wheels (a
zip with the METADATA, entry_points.txt and RECORD pip writes) stand for the published plugins:
one asking for permissions, a newer version of it, one needing another chatfn, two pinning one
library differently, and a library that is no plugin."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatfn.cli import main
from chatfn.common.version import __version__
from chatfn.plugin_new import default_range
from chatfn.runtime.plugin_pip import declared, index_options, read_wheel

ROOT = Path(__file__).resolve().parents[2]


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    *,
    requires: tuple[str, ...] = (),
    modules: dict[str, str] | None = None,
    plugins: dict[str, str] | None = None,
) -> Path:
    """A wheel as pip writes one: the files, METADATA, WHEEL, entry_points.txt and RECORD."""
    norm = name.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    files: dict[str, bytes] = {k: v.encode() for k, v in (modules or {}).items()}
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Summary: {name} for tests"] + [f"Requires-Dist: {r}" for r in requires]
    files[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if plugins:
        lines = "".join(f"{k} = {v}\n" for k, v in plugins.items())
        files[f"{info}/entry_points.txt"] = f"[chatfn.plugins]\n{lines}".encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{norm}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name_, data in files.items():
            zf.writestr(name_, data)
    return path


def plugin_source(name: str, permissions: tuple[str, ...], text: str) -> str:
    return (
        "from function_calls import FunctionResult, MessageContext, Plugin, tool_function\n"
        f"plugin = Plugin({name!r}, permissions={permissions!r})\n"
        f"@tool_function(name='{name}_say', description='Say.')\n"
        "async def say(ctx: MessageContext) -> FunctionResult:\n"
        f"    return FunctionResult(messages=[{text!r}])\n"
    )


def hello(folder: Path, version: str) -> Path:
    return make_wheel(
        folder,
        "chatfn-hello",
        version,
        requires=("chatfn>=0.1",),
        modules={"chatfn_hello.py": plugin_source("hello", ("network", "model"), version)},
        plugins={"hello": "chatfn_hello"},
    )


def refused_wheels(folder: Path) -> None:
    """The wheels whose installs are refused: chatfn-future (needs chatfn 99, which the index
    offers), and chatfn-pinner / chatfn-bumper pinning libdep 1.0 and >= 2 (both offered)."""
    make_wheel(folder, "chatfn", "99.0")  # a chatfn the index offers, never to be installed
    make_wheel(
        folder,
        "chatfn-future",
        "1.0",
        requires=("chatfn>=99",),
        modules={"chatfn_future.py": plugin_source("future", (), "x")},
        plugins={"future": "chatfn_future"},
    )
    for version in ("1.0", "2.0"):
        make_wheel(folder, "libdep", version, modules={"libdep.py": f"V = {version!r}\n"})
    for name, pin in (("pinner", "libdep==1.0"), ("bumper", "libdep>=2")):
        make_wheel(
            folder,
            f"chatfn-{name}",
            "1.0",
            requires=(pin,),
            modules={f"chatfn_{name}.py": plugin_source(name, (), name)},
            plugins={name: f"chatfn_{name}"},
        )


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PIP_"))}
    env.pop("PYTHONPATH", None)
    env["PIP_NO_INPUT"] = "1"
    return env


class Venv:
    """A virtual environment that sees the system's packages (chatfn under test, pip, pytest)
    and gets its own: what `chatfn plugin` installs lands here, never in the test's own."""

    def __init__(self, root: Path, config: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root)],
            check=True,
        )
        self.python = root / "bin" / "python"
        self.config = config

    def run(
        self, *args: str, stdin: str = "", cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=clean_env(),
            timeout=300,
            check=False,
        )

    def chatfn(
        self, *args: str, stdin: str = "", config: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        file = str(config or self.config)
        return self.run("-m", "chatfn", "plugin", *args, "--config", file, stdin=stdin)


@pytest.fixture
def venv(tmp_path: Path) -> Iterator[Venv]:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    config = tmp_path / "config.yaml"
    # Relative: to the config file. pip: uv does not see a --system-site-packages venv's
    # inherited packages (the chatfn under test), so these runs ask for pip by name; uv has
    # its own test below.
    config.write_text("plugins:\n  package_index: wheels\n  installer: pip\n")
    yield Venv(tmp_path / "venv", config)


# A venv, a wheel built with pip and two pytest runs in it, about 30 s of one worker: in the
# services lane .ci/run runs.
@pytest.mark.services
def test_new_writes_a_package_that_installs_and_passes_its_own_test(
    venv: Venv, tmp_path: Path
) -> None:
    assert main(["plugin", "new", "demo", "--dir", str(tmp_path)]) == 0
    package = tmp_path / "chatfn-demo"
    pyproject = (package / "pyproject.toml").read_text()
    assert '[project.entry-points."chatfn.plugins"]\ndemo = "chatfn_demo"' in pyproject
    assert f'"chatfn{default_range()}"' in pyproject
    assert main(["plugin", "new", "demo", "--dir", str(tmp_path)]) == 2  # never overwritten
    # Not installed yet: its test fails (it finds the plugin through its entry point).
    before = venv.run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package)
    assert before.returncode != 0 and "1 failed" in before.stdout
    # Built from a copy: setuptools leaves an .egg-info (entry points included) where it
    # builds, which would make the source folder look installed.
    shutil.copytree(package, tmp_path / "build")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "--wheel-dir", str(tmp_path / "wheels"), str(tmp_path / "build")],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    assert built.returncode == 0, built.stderr
    done = venv.chatfn("install", "chatfn-demo", "--yes")
    assert done.returncode == 0, done.stderr
    assert "package:     chatfn-demo 0.1.0 (plugin demo)" in done.stdout
    listed = venv.chatfn("list")
    assert "chatfn-demo 0.1.0  plugin demo  on" in listed.stdout
    tested = venv.run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
    assert venv.chatfn("remove", "demo", "--yes").returncode == 0
    assert "no plugin package installed" in venv.chatfn("list").stdout


# Real pip (and uv) runs into a venv, about a minute: in the services lane .ci/run runs.
@pytest.mark.services
def test_install_upgrade_remove_with_confirmation_and_refusals(venv: Venv, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    first = hello(wheels, "1.0")
    hello(wheels, "2.0")
    refused_wheels(wheels)
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    # plugins.index_url: an index listing hello 1.0 with its hash, pinner 1.0 with another.
    index = {
        "format": 1,
        "plugins": [
            {
                "name": name,
                "kind": "package",
                "distribution": f"chatfn-{name}",
                "summary": name,
                "versions": [
                    {
                        "version": "1.0",
                        "chatfn": "",
                        "files": [{"filename": "w.whl", "sha256": sha}],
                    }
                ],
            }
            for name, sha in (("hello", digest), ("pinner", "0" * 64))
        ],
    }
    (tmp_path / "index.json").write_text(json.dumps(index))
    indexed = tmp_path / "indexed.yaml"
    indexed.write_text(
        "plugins:\n  package_index: wheels\n  index_url: index.json\n  installer: pip\n"
    )

    # Asked first: package, version, permissions, hash; "n" installs nothing.
    no = venv.chatfn("install", "chatfn-hello==1.0", stdin="n\n", config=indexed)
    assert no.returncode == 1 and "not installed" in no.stdout
    for shown in ("chatfn-hello 1.0 (plugin hello)", "permissions: model, network", digest):
        assert shown in no.stdout
    assert "listed in index.json, sha256 matches" in no.stdout
    # A file whose hash is not the one the index lists for that version: refused.
    wrong = venv.chatfn("install", "chatfn-pinner", "--yes", config=indexed)
    assert wrong.returncode == 2 and "is not one plugins.index_url lists" in wrong.stderr
    assert "no plugin package installed" in venv.chatfn("list").stdout
    yes = venv.chatfn("install", "chatfn-hello==1.0", stdin="y\n")
    assert yes.returncode == 0, yes.stderr
    assert "chatfn-hello 1.0  plugin hello  on" in venv.chatfn("list").stdout

    # What would change chatfn itself, or a version an installed plugin pins: refused.
    future = venv.chatfn("install", "chatfn-future", "--yes")
    assert future.returncode == 2
    assert f"chatfn {__version__} -> 99.0" in future.stderr
    assert venv.chatfn("install", "chatfn-pinner", "--yes").returncode == 0
    bumper = venv.chatfn("install", "chatfn-bumper", "--yes")
    assert bumper.returncode == 2
    assert "libdep 1.0 -> 2.0, but chatfn-pinner needs libdep==1.0" in bumper.stderr
    library = venv.chatfn("install", "libdep", "--yes")
    assert library.returncode == 2 and "is not a chatfn plugin" in library.stderr

    upgraded = venv.chatfn("upgrade", "chatfn-hello", "--yes")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "upgrade chatfn-hello 1.0 -> 2.0" in upgraded.stdout
    listed = venv.chatfn("list").stdout
    assert "chatfn-hello 2.0" in listed and "chatfn-bumper" not in listed
    assert venv.chatfn("remove", "hello", "--yes").returncode == 0
    gone = venv.chatfn("remove", "libdep", "--yes")
    assert gone.returncode == 2 and "no installed plugin package 'libdep'" in gone.stderr
    assert "chatfn-hello" not in venv.chatfn("list").stdout


def test_permissions_are_read_from_the_source_never_run(tmp_path: Path) -> None:
    source = (
        "import os\nos.remove('/nothing')\n"
        "plugin = Plugin('x', chatfn='>=0.2', permissions=['filesystem'])\n"
    )
    assert declared(source) == (["filesystem"], ">=0.2")
    wheel = read_wheel(
        make_wheel(
            tmp_path,
            "chatfn-x",
            "1.0",
            requires=("chatfn>=0.1,<1",),
            modules={
                "chatfn_x/__init__.py": "from function_calls import Plugin\nplugin = Plugin('x')\n"
            },
            plugins={"x": "chatfn_x"},
        )
    )
    assert (wheel.permissions, wheel.chatfn, wheel.plugins) == ([], "<1,>=0.1", {"x": "chatfn_x"})


# Real pip (and uv) runs into a venv, about a minute: in the services lane .ci/run runs.
@pytest.mark.services
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed (pip install uv)")
def test_uv_installs_checks_and_removes_when_asked(venv: Venv, tmp_path: Path) -> None:
    """`plugins.installer: uv`: uv's dry run is what the refusals read (uv resolves, so uv is
    asked what it would change) and uv installs and removes; its INSTALLER mark says so. The
    plugins here need nothing the venv inherits (uv sees only the venv's own packages)."""
    wheels = tmp_path / "wheels"
    make_wheel(
        wheels,
        "chatfn-solo",
        "1.0",
        modules={"chatfn_solo.py": plugin_source("solo", (), "solo")},
        plugins={"solo": "chatfn_solo"},
    )
    refused_wheels(wheels)
    config = tmp_path / "uv.yaml"
    config.write_text("plugins:\n  package_index: wheels\n  installer: uv\n")

    done = venv.chatfn("install", "chatfn-solo", "--yes", config=config)
    assert done.returncode == 0, done.stderr
    marks = list((tmp_path / "venv").glob("lib/python*/site-packages/chatfn_solo-1.0.dist-info"))
    assert len(marks) == 1 and (marks[0] / "INSTALLER").read_text().strip() == "uv"
    assert "chatfn-solo 1.0  plugin solo  on" in venv.chatfn("list", config=config).stdout

    future = venv.chatfn("install", "chatfn-future", "--yes", config=config)
    assert future.returncode == 2 and "-> 99.0" in future.stderr, future.stderr
    assert venv.chatfn("install", "chatfn-pinner", "--yes", config=config).returncode == 0
    bumper = venv.chatfn("install", "chatfn-bumper", "--yes", config=config)
    assert bumper.returncode == 2
    assert "libdep 1.0 -> 2.0, but chatfn-pinner needs libdep==1.0" in bumper.stderr

    assert venv.chatfn("remove", "solo", "--yes", config=config).returncode == 0
    assert "chatfn-solo" not in venv.chatfn("list", config=config).stdout
    assert not marks[0].exists()

    # Asked for uv where there is none: one line saying so, nothing installed.
    env = clean_env() | {"PATH": str(tmp_path / "venv" / "bin") + ":/usr/bin:/bin"}
    missing = subprocess.run(
        [str(venv.python), "-m", "chatfn", "plugin", "install", "chatfn-solo", "--yes"]
        + ["--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert missing.returncode == 2, missing.stderr
    assert "plugins.installer is uv, but no uv is on PATH" in missing.stderr


def test_the_package_index_setting(tmp_path: Path) -> None:
    assert index_options(None, tmp_path) == []
    assert index_options("https://pypi.example/simple", tmp_path) == [
        "--index-url",
        "https://pypi.example/simple",
    ]
    assert index_options("wheels", tmp_path) == [
        "--no-index",
        "--find-links",
        str(tmp_path / "wheels"),
    ]


def test_install_writes_the_project_indexs_example_file_from_the_default_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No plugins.index_url: the project's own index as chatfn ships it (offline); its example
    plugin file is checked against the sha256 listed there and written into the plugins folder,
    once; a file of the operator's own there is never overwritten."""
    config = tmp_path / "config.yaml"
    config.write_text("plugins:\n  paths: [plugins]\n")
    command = ["plugin", "install", "example", "--config", str(config)]
    assert main([*command, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "plugin file: example 0.2.0 ->" in out and "sha256 matches" in out
    written = tmp_path / "plugins" / "example.py"
    assert written.read_bytes() == (ROOT / "plugins" / "example.py").read_bytes()
    assert main([*command, "--yes"]) == 0
    assert "is installed already" in capsys.readouterr().out
    written.write_text("# my own\n")
    assert main([*command, "--yes"]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert written.read_text() == "# my own\n"


def test_remove_deletes_a_plugin_file_the_index_lists_never_one_of_your_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`chatfn plugin remove example`: the installed example file (a version the index lists)
    is deleted after the yes; a file of the operator's own, or one they changed, is refused
    and kept."""
    config = tmp_path / "config.yaml"
    config.write_text("plugins:\n  paths: [plugins]\n")
    written = tmp_path / "plugins" / "example.py"
    remove = ["plugin", "remove", "example", "--config", str(config)]
    assert main(["plugin", "install", "example", "--config", str(config), "--yes"]) == 0
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(remove) == 1  # asked, and told no
    out = capsys.readouterr().out
    assert f"plugin file: example 0.2.0 at {written}" in out and "not removed" in out
    assert written.exists()
    written.write_text(written.read_text() + "# changed\n")
    assert main([*remove, "--yes"]) == 2
    assert "remove it by hand" in capsys.readouterr().err and written.exists()
    written.write_bytes((ROOT / "plugins" / "example.py").read_bytes())
    assert main([*remove, "--yes"]) == 0
    assert f"removed {written}" in capsys.readouterr().out and not written.exists()
    assert main([*remove, "--yes"]) == 2
    assert "no installed plugin package 'example', nor a plugin file example.py" in (
        capsys.readouterr().err
    )


def test_an_index_its_schema_refuses_is_one_error_and_nothing_is_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """plugins.index_url naming an index that breaks plugins/index.schema.json: `install` and
    `remove` each stop with one error naming the index and its first bad field; nothing is
    written."""
    index = json.loads((ROOT / "plugins" / "index.json").read_text(encoding="utf-8"))
    index["plugins"][0]["versions"][0]["files"][0]["sha256"] = "abc"
    (tmp_path / "index.json").write_text(json.dumps(index))
    shutil.copy(ROOT / "plugins" / "example.py", tmp_path / "example.py")
    config = tmp_path / "config.yaml"
    config.write_text("plugins:\n  paths: [plugins]\n  index_url: index.json\n")
    where = "plugins[0].versions[0].files[0].sha256"
    assert main(["plugin", "install", "example", "--config", str(config), "--yes"]) == 2
    err = capsys.readouterr().err
    assert "plugins.index_url index.json: not a valid plugin index at " + where in err, err
    assert not (tmp_path / "plugins" / "example.py").exists()
    (tmp_path / "plugins").mkdir()
    shutil.copy(ROOT / "plugins" / "example.py", tmp_path / "plugins" / "example.py")
    assert main(["plugin", "remove", "example", "--config", str(config), "--yes"]) == 2
    assert where in capsys.readouterr().err
    assert (tmp_path / "plugins" / "example.py").exists()
