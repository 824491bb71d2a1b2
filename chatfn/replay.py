"""`chatfn replay --chats GLOB --since DATE --model NAME [--against MODEL] [--limit N]`
(`--persona NAME`, `--out DIR`, `--config FILE`): rehearse a model or persona switch on the
chats' recorded turns (issue 40.5, chatfn/runtime/replay/) and write the report as
`replay.json` and `replay.html` in `--out`. Nothing is sent to any chat and no function with
effects runs: the bot is built as `chatfn run` builds it (config, plugins, models, database)
but no channel is, and its database is only read."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DESCRIPTION = (
    "Replay recorded turns against another model and write a report (HTML and JSON); "
    "nothing is sent to any chat."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chats", required=True, metavar="GLOB", help="chats as platform:chat_id, a glob (*:g1)"
    )
    parser.add_argument(
        "--since", required=True, metavar="DATE", help="turns from DATE on (ISO 8601; UTC)"
    )
    parser.add_argument("--model", required=True, metavar="NAME", help="the model to try")
    parser.add_argument(
        "--against",
        metavar="MODEL",
        help="compare with this model asked now (default: the answers recorded then)",
    )
    parser.add_argument("--limit", type=int, default=50, metavar="N", help="turns (default 50)")
    parser.add_argument(
        "--persona",
        metavar="NAME",
        help="ask --model with this persona (personas:) instead of each chat's prompt",
    )
    parser.add_argument(
        "--out", default="replay", metavar="DIR", help="report folder (default ./replay)"
    )
    parser.add_argument("--config", help="config file (default: ./config.yaml if present)")


def parse_since(text: str) -> datetime:
    """An ISO date or time; without an offset it is UTC (the database's times are)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--since {text!r}: not an ISO 8601 date (2026-11-01 or 2026-11-01T08:00)"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


async def run_replay(args: argparse.Namespace, since: datetime) -> dict[str, Any]:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.replay import replay
    from chatfn.runtime.settings import load_settings

    bot = Bot(load_settings(args.config), migrate=False)
    try:
        return await replay(
            bot,
            bot.models.named_exactly,
            chats=args.chats,
            since=since,
            model=args.model,
            against=args.against,
            limit=args.limit,
            persona=args.persona,
        )
    finally:
        await bot.aclose()


def write(report: dict[str, Any], out: Path) -> tuple[Path, Path]:
    from chatfn.runtime.replay import html

    out.mkdir(parents=True, exist_ok=True)
    as_json, as_html = out / "replay.json", out / "replay.html"
    as_json.write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    as_html.write_text(html(report), encoding="utf-8")
    return as_json, as_html


def command(args: argparse.Namespace) -> int:
    from chatfn.runtime.replay import ReplayError

    if args.limit < 1:
        print("chatfn: --limit must be at least 1", file=sys.stderr)
        return 2
    try:
        since = parse_since(args.since)
        report = asyncio.run(run_replay(args, since))
    except (argparse.ArgumentTypeError, ReplayError) as exc:
        print(f"chatfn: {exc}", file=sys.stderr)
        return 2
    as_json, as_html = write(report, Path(args.out))
    total = report["summary"]
    print(
        f"{total['turns']} turn(s) replayed, {total['differ']} differ; "
        f"report: {as_html} and {as_json}"
    )
    for line in total["differences"][:20]:
        print(f"  {line}")
    return 0
