"""`chatfn admin passwd USER` prints a scrypt hash that the console's login accepts and that
validates as `admin.users.USER.password_hash`."""

from __future__ import annotations

import io

from chatfn.channels.http.admin.passwords import verify_password
from chatfn.cli import main
from chatfn.runtime.settings import parse_settings


def test_passwd_prints_a_hash_the_login_accepts(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("correct horse\n"))
    assert main(["admin", "passwd", "alice"]) == 0
    out, err = capsys.readouterr()
    hashed = out.strip()
    assert hashed.startswith("scrypt$16384$8$1$") and "alice" in err
    assert verify_password("correct horse", hashed)
    assert not verify_password("correct horse!", hashed)
    users = {"alice": {"password_hash": hashed}}
    assert parse_settings({"admin": {"users": users}}, base_dir=tmp_path).admin.users["alice"]


def test_passwd_refuses_a_short_password(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["admin", "passwd", "alice"]) == 2
    assert "at least 8" in capsys.readouterr().err
