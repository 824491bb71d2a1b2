"""README's "Add a capability" section, taken as written: the plugin passes the project's own lint
and format rules when saved as `plugins/weather.py`, and the test shown beside it passes.

The same plugin, end to end through the plugin door: its config section is validated with the
key path in errors, its start-up hook provides the service its handler uses, and its status line
reaches check_system.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chatfn.runtime.settings import ConfigError
from chatfn.testing import ScriptedModel, TestBot, call, say

ROOT = Path(__file__).resolve().parents[1]


def readme_blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


PLUGIN, PLUGIN_TEST = readme_blocks("Add a capability")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project folder with README's plugin saved as written."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "weather.py").write_text(PLUGIN, encoding="utf-8")
    return tmp_path


def _ruff() -> str:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists() and shutil.which(ruff) is None:
        pytest.skip("ruff is not installed (it is in the test extra)")
    return ruff


def test_the_plugin_passes_the_projects_lint_and_format(project: Path) -> None:
    # Inside the project, as README says to put it: the project's own rules apply. Given on
    # stdin with that file name, so no file appears in the checkout while other tests (or
    # other pytest workers) read its plugins folder.
    target = "plugins/weather_readme_check.py"
    for args in (["check", "--no-cache"], ["format", "--check", "--no-cache"]):
        proc = subprocess.run(
            [_ruff(), *args, "--stdin-filename", target],
            cwd=ROOT,
            input=PLUGIN,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_readme_test_passes_with_the_fixture(project: Path) -> None:
    (project / "test_weather.py").write_text(PLUGIN_TEST, encoding="utf-8")
    (project / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_weather.py"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


async def test_settings_section_start_up_hook_and_service(project: Path) -> None:
    plugin = str(project / "plugins" / "weather.py")
    tb = TestBot(
        project,
        plugins=[plugin],
        config={"weather": {"units": "imperial"}},
        model=ScriptedModel([call("weather", city="Oslo"), say("69°F in Oslo")]),
    )
    # Before start, the start-up hook has not provided the service: the handler says so.
    assert await tb.send("/weather Oslo") == ["The weather service is not running."]
    await tb.start()
    try:
        assert await tb.send("/weather city=Oslo") == ["Oslo: 69°F"]
        assert await tb.send("weather in Oslo?") == ["69°F in Oslo"]
        [row] = [p for p in tb.settings.plugins_loaded if p.name == "weather"]
        assert row.state(tb.settings).detail == "temperatures in imperial units"
    finally:
        await tb.aclose()


def test_a_bad_value_names_the_key_path(project: Path) -> None:
    with pytest.raises(ConfigError) as err:
        TestBot(
            project,
            plugins=[str(project / "plugins" / "weather.py")],
            config={"weather": {"units": "kelvin"}},
        )
    assert "weather.units: Input should be 'metric' or 'imperial'" in str(err.value)


def test_a_section_no_plugin_declares_is_an_error(project: Path) -> None:
    with pytest.raises(ConfigError) as err:
        TestBot(project, config={"weather": {"units": "metric"}})  # plugin not loaded
    assert "weather: unknown key" in str(err.value)


def test_check_system_prints_the_plugins_status_line(project: Path) -> None:
    (project / "config.yaml").write_text(
        "storage: {url: 'sqlite:///x.db'}\nweather: {units: metric}\n", encoding="utf-8"
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "check_system.py"), "--json"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["plugin weather"] == {
        "name": "plugin weather",
        "status": "ok",
        "detail": "on: temperatures in metric units",
    }
    assert "1 built-in" not in checks["plugins"]["detail"]
    assert "1 plugin function(s)" in checks["plugins"]["detail"]
