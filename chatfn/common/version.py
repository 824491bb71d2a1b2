"""The release number, kept here and nowhere else: pyproject.toml reads it (setuptools dynamic
version), `chatfn --version` and `python bot.py --version` print it. CHANGELOG.md has a
section for each."""

__version__ = "0.2.0"
