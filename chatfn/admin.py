"""`chatfn admin passwd USER`: print a password hash for `admin.users.USER.password_hash`.

The password is read without echo from the terminal (twice), or as one line from standard
input when that is not a terminal (`echo "$PW" | chatfn admin passwd alice`); it is never an
argument, which would land in the shell's history and the process list."""

from __future__ import annotations

import argparse
import getpass
import sys

MIN_LENGTH = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)
    passwd = sub.add_parser(
        "passwd",
        help="Print a password hash for admin.users.USER.password_hash.",
        description="Print a password hash for admin.users.USER.password_hash (scrypt).",
    )
    passwd.add_argument("user", metavar="USER", help="the console user the hash is for")


def _read_password() -> str | None:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("New admin password: ")
    if getpass.getpass("Again: ") != first:
        print("chatfn: the two passwords differ", file=sys.stderr)
        return None
    return first


def command(args: argparse.Namespace) -> int:
    from chatfn.channels.http.admin.passwords import hash_password

    password = _read_password()
    if password is None:
        return 2
    if len(password) < MIN_LENGTH:
        print(f"chatfn: a password of at least {MIN_LENGTH} characters", file=sys.stderr)
        return 2
    print(hash_password(password))
    print(
        f'# config.yaml:\n# admin:\n#   users:\n#     {args.user}: {{password_hash: "..."}}',
        file=sys.stderr,
    )
    return 0
