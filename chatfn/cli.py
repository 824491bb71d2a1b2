"""The `chatfn` command line: argparse subcommands, each a module of this package.

`chatfn` alone (or with only flags) is `chatfn run`, so `chatfn --config bot.yaml` starts the
bot as `python bot.py --config bot.yaml` does. A new subcommand is one more entry in `commands`
(its module adds its flags and handles its namespace), nested ones included (a subparser of
its own). Errors a user can fix (bad config, unusable database, a plugin that fails, a missing
SDK or extra) are one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from chatfn.common.version import __version__

Handler = Callable[[argparse.Namespace], int]


def build_parser(prog: str = "chatfn") -> argparse.ArgumentParser:
    from chatfn import admin, check, init, login, plugin_cli, replay, run

    parser = argparse.ArgumentParser(
        prog=prog,
        description="chatfn: a chat bot in which every capability is a Python function. "
        "Without a command: run the bot.",
    )
    parser.add_argument("--version", action="version", version=f"chatfn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Handler]] = [
        ("run", "Run the bot (the default command).", run.add_arguments, run.command),
        ("check", check.DESCRIPTION, check.add_arguments, check.command),
        (
            "migrate",
            "Bring the database schema up to date and exit.",
            run.add_migrate_arguments,
            run.migrate,
        ),
        (
            "init",
            "Write a commented config.yaml and plugins/example.py (never overwriting).",
            init.add_arguments,
            init.command,
        ),
        ("admin", "The web admin console: passwd USER.", admin.add_arguments, admin.command),
        (
            "login",
            "Log a channel in (weixin: scan the QR code) and keep the login in the database.",
            login.add_arguments,
            login.command,
        ),
        ("plugin", plugin_cli.DESCRIPTION, plugin_cli.add_arguments, plugin_cli.command),
        ("replay", replay.DESCRIPTION, replay.add_arguments, replay.command),
    ]
    for name, help_, add_arguments, handler in commands:
        command = sub.add_parser(name, help=help_, description=help_)
        add_arguments(command)
        command.set_defaults(handler=handler)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "chatfn") -> int:
    from chatfn.runtime.settings import ConfigError
    from chatfn.storage.db import StorageError
    from function_calls.registry import PluginLoadError
    from providers.errors import ProviderNotInstalled

    args_in = list(sys.argv[1:] if argv is None else argv)
    if not args_in or (
        args_in[0].startswith("-") and args_in[0] not in ("-h", "--help", "--version")
    ):
        args_in.insert(0, "run")
    args = build_parser(prog).parse_args(args_in)
    try:
        return args.handler(args)
    except (ConfigError, StorageError, PluginLoadError, ProviderNotInstalled) as exc:
        print(f"chatfn: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
