"""A replay's report: per turn the two sides (the model tried and what it is compared with),
where they differ, and a summary, as JSON (`replay.json`, the console's answer) and as one
self-contained HTML page (`replay.html`: no script, every text escaped).

Shape (docs/groups.md "Rehearse before you switch" shows an example):
`{"replay": {...the run...}, "summary": {...}, "turns": [{"message": {...}, "model": SIDE,
"against": SIDE, "differs": [...]}]}`, a SIDE being `Side.json()` (engine.py).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from html import escape
from typing import Any

from chatfn.runtime.replay.engine import Side, canonical
from chatfn.storage.replay import RecordedTurn

#: The aspects a turn's two sides are compared on, in the order the report lists them.
ASPECTS = ("tools", "arguments", "answer", "refusals", "errors")


def differences(a: Side, b: Side) -> list[str]:
    """Where two answers to one turn differ (`ASPECTS`)."""
    found = []
    tools_a = [c.function for c in a.calls]
    tools_b = [c.function for c in b.calls]
    if tools_a != tools_b:
        found.append("tools")
    elif [canonical(c.arguments) for c in a.calls] != [canonical(c.arguments) for c in b.calls]:
        found.append("arguments")
    if " ".join(a.answer.split()) != " ".join(b.answer.split()):
        found.append("answer")
    if bool(a.refusals) != bool(b.refusals):
        found.append("refusals")
    if (a.error is None) != (b.error is None):
        found.append("errors")
    return found


def turn_json(turn: RecordedTurn, model: Side, against: Side) -> dict[str, Any]:
    return {
        "message": {
            "id": turn.id,
            "chat": turn.chat,
            "message_id": turn.message_id,
            "sender": turn.sender_name or turn.sender_id,
            "time": turn.time(),
            "text": turn.text,
        },
        "model": model.json(),
        "against": against.json(),
        "differs": differences(model, against),
    }


def _side_totals(sides: list[dict[str, Any]]) -> dict[str, Any]:
    costs = [s["cost"] for s in sides if s["cost"] is not None]
    hows = Counter(c["how"] for s in sides for c in s["calls"])
    return {
        "model": sides[0]["model"] if sides else "",
        "tokens": {
            "prompt": sum(s["tokens"]["prompt"] for s in sides),
            "completion": sum(s["tokens"]["completion"] for s in sides),
        },
        "cost": round(sum(costs), 8) if costs else None,
        "tools": dict(Counter(t for s in sides for t in s["tools"])),
        "refusals": sum(1 for s in sides if s["refusals"]),
        "errors": sum(1 for s in sides if s["error"]),
        "calls_recorded": hows.get("recorded", 0),
        "calls_ran": hows.get("ran", 0),
        "calls_not_run": hows.get("not_run", 0),
    }


def _names(tools: list[str]) -> str:
    return ", ".join(tools) if tools else "none"


def _line(turn: dict[str, Any]) -> str:
    """One sentence of where a turn differs, for the summary."""
    m, a = turn["model"], turn["against"]
    parts = []
    for aspect in turn["differs"]:
        if aspect == "tools":
            parts.append(f"tools {_names(m['tools'])} vs {_names(a['tools'])}")
        elif aspect == "refusals":
            parts.append(f"refusals {len(m['refusals'])} vs {len(a['refusals'])}")
        else:
            parts.append(aspect)
    return f"{turn['message']['chat']} {turn['message']['message_id']}: " + "; ".join(parts)


def summary(turns: list[dict[str, Any]]) -> dict[str, Any]:
    differ = [t for t in turns if t["differs"]]
    return {
        "turns": len(turns),
        "differ": len(differ),
        "same": len(turns) - len(differ),
        "by_aspect": {k: sum(1 for t in turns if k in t["differs"]) for k in ASPECTS},
        "model": _side_totals([t["model"] for t in turns]),
        "against": _side_totals([t["against"] for t in turns]),
        "differences": [_line(t) for t in differ],
    }


def report(run: dict[str, Any], turns: list[dict[str, Any]]) -> dict[str, Any]:
    made = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return {"replay": {**run, "created_at": made}, "summary": summary(turns), "turns": turns}


# -- HTML --------------------------------------------------------------------------------------

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;width:100%;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.4em;vertical-align:top;text-align:left}
th{background:#f4f4f4}.differs{background:#fff4e0}.same{background:#eef8ee}
pre{white-space:pre-wrap;margin:0;font:12px/1.4 ui-monospace,monospace}
.tag{display:inline-block;padding:0 .4em;border-radius:3px;background:#e0a030;color:#fff}
"""


def _counts(tools: dict[str, int]) -> str:
    return ", ".join(f"{name} × {n}" for name, n in tools.items()) or "none"


def _calls(side: dict[str, Any]) -> str:
    if not side["calls"]:
        return "<em>no function</em>"
    rows = []
    for c in side["calls"]:
        args = canonical(c["arguments"])
        rows.append(
            f"<li><b>{escape(c['function'])}</b> <code>{escape(args)}</code> "
            f"<i>({escape(c['how'])}, {escape(c['outcome'])})</i>"
            f"<pre>{escape(c['result'][:600])}</pre></li>"
        )
    return "<ul>" + "".join(rows) + "</ul>"


def _cell(side: dict[str, Any]) -> str:
    cost = "" if side["cost"] is None else f", cost {side['cost']:.6f}"
    refusals = "".join(f"<li>{escape(r)}</li>" for r in side["refusals"])
    error = f"<p><b>error:</b> {escape(side['error'])}</p>" if side["error"] else ""
    return (
        f"{_calls(side)}<pre>{escape(side['answer'])}</pre>{error}"
        + (f"<p>refusals:</p><ul>{refusals}</ul>" if refusals else "")
        + f"<p><small>{side['tokens']['prompt']} + {side['tokens']['completion']} tokens"
        f"{cost}, {side['rounds']} round(s)</small></p>"
    )


def html(data: dict[str, Any]) -> str:
    run, total = data["replay"], data["summary"]
    head = (
        f"<h1>chatfn replay: {escape(str(run['model']))} against "
        f"{escape(str(run['against']))}</h1>"
        f"<p>Chats {escape(str(run['chats']))} since {escape(str(run['since']))}; "
        f"{total['turns']} turn(s), {total['differ']} differ. Nothing was sent to any chat.</p>"
    )
    rows = []
    for key in ("model", "against"):
        side = total[key]
        cost = "" if side["cost"] is None else f"{side['cost']:.6f}"
        rows.append(
            f"<tr><th>{escape(key)}: {escape(side['model'])}</th>"
            f"<td>{side['tokens']['prompt']} + {side['tokens']['completion']}</td>"
            f"<td>{cost}</td><td>{escape(_counts(side['tools']))}</td>"
            f"<td>{side['refusals']}</td><td>{side['errors']}</td>"
            f"<td>{side['calls_recorded']} / {side['calls_ran']} / {side['calls_not_run']}</td>"
            "</tr>"
        )
    totals = (
        "<table><tr><th></th><th>tokens (prompt + completion)</th><th>cost</th><th>tools</th>"
        "<th>turns with refusals</th><th>errors</th><th>calls recorded / ran / not run</th>"
        "</tr>" + "".join(rows) + "</table>"
    )
    diffs = "".join(f"<li>{escape(line)}</li>" for line in total["differences"])
    if diffs:
        pair = f"{escape(str(run['model']))} vs {escape(str(run['against']))}"
        diffs = f"<p>Where they differ ({pair}):</p><ul>{diffs}</ul>"
    turns = []
    for t in data["turns"]:
        m = t["message"]
        tags = " ".join(f'<span class="tag">{escape(d)}</span>' for d in t["differs"])
        turns.append(
            f'<tr class="{"differs" if t["differs"] else "same"}"><td>'
            f"<b>{escape(m['chat'])}</b> {escape(m['message_id'])}<br>{escape(m['time'])}<br>"
            f"{escape(m['sender'])}: <pre>{escape(m['text'])}</pre>{tags}</td>"
            f"<td>{_cell(t['model'])}</td><td>{_cell(t['against'])}</td></tr>"
        )
    table = (
        "<table><tr><th>turn</th><th>model: "
        + escape(str(run["model"]))
        + "</th><th>against: "
        + escape(str(run["against"]))
        + "</th></tr>"
        + "".join(turns)
        + "</table>"
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>chatfn replay</title>'
        f"<style>{_STYLE}</style></head><body>{head}<h2>Summary</h2>{totals}"
        f"{diffs}<h2>Turns</h2>{table}</body></html>\n"
    )
