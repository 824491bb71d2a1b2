"""Run the real-output cases (tests/fixtures/text_tool_calls) through the parser; print a table.

    python -m providers.text_tools.report [path/to/cases.jsonl] [--failures]

Without a path it reads every `*.jsonl` in tests/fixtures/text_tool_calls (cases.jsonl first, so
its case numbers below stay stable). The same evaluation is asserted by
tests/providers/text_tools/test_cases.py. How each case's offered tools are chosen (the parser
only accepts offered names, so this matters):

* positives: the names of the expected calls, plus the few names listed in EXTRA_ALLOWED (calls
  the case shows inside a think block or beside the real call, which must still not count);
* negatives: every identifier-like word of the text, so that "not a call" is tested with the
  name offered; minus NOT_OFFERED, the cases whose point is a name the request did not offer.
* a case may list its offered tools itself (`offered`), where the point is a choice among them
  (a Kimi call id with no name) or a sibling the parser must drop.

Schemas are derived from the expected arguments' JSON types, standing in for the function
definitions the real request carried (several cases are typed by schema, see their notes). A case
may instead give `schemas` itself (union types), and `prompt_format`, the format the prompt
taught (it decides whether a fenced call may run, README.md "Code fences").
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from providers.text_tools.parser import StreamingToolParser
from providers.text_tools.result import ParsedText

ROOT = Path(__file__).resolve().parents[2]
CASE_DIR = ROOT / "tests" / "fixtures" / "text_tool_calls"
CASES = CASE_DIR / "cases.jsonl"

#: Case index -> (name, why) offered in addition to the expected calls' names.
EXTRA_ALLOWED: dict[int, tuple[str, str]] = {
    12: ("A", "the same tool is drafted inside <think>; only the call after it counts"),
    55: ("bad", "the sibling call with an unconvertible bytes literal is offered too"),
    128: ("ignored_tool", "offered, but written inside <think>: must not be executed"),
}
#: Case index -> names the request did not offer (the case tests hallucinated names).
NOT_OFFERED: dict[int, set[str]] = {
    44: {"not_a_tool"},
    115: {"invalid_func"},
    123: {"delete_everything"},
}
#: Case index -> why our documented policy gives different non-call text than the fixture.
CONTENT_POLICY: dict[int, str] = {
    79: "a failed [TOOL_CALLS] section keeps its marker as text (nothing is dropped)",
    150: "agent-protocol final answers (<final_answer>) are not unwrapped: not a tool format",
    152: "ReAct 'Final Answer:' is not unwrapped: not a tool format",
    155: "LangChain JSON-agent 'Final Answer' fence is not unwrapped: not a tool format",
}

_IDENT = re.compile(r"[A-Za-z_][\w.\-]*")


def load_cases(path: Path | None = None) -> list[dict[str, Any]]:
    """One file, or every fixture file (cases.jsonl first); each case records its `file`."""
    if path is None:
        paths = [CASES] + sorted(p for p in CASE_DIR.glob("*.jsonl") if p != CASES)
    else:
        paths = [path]
    cases: list[dict[str, Any]] = []
    for p in paths:
        with p.open(encoding="utf-8") as fh:
            cases += [dict(json.loads(line), file=p.name) for line in fh if line.strip()]
    return cases


def allowed_for(index: int, case: dict[str, Any]) -> set[str]:
    if "offered" in case:
        return set(case["offered"])
    if case["expected"]:
        names = {c["name"] for c in case["expected"]}
        if index in EXTRA_ALLOWED:
            names.add(EXTRA_ALLOWED[index][0])
        return names
    return set(_IDENT.findall(case["text"])) - NOT_OFFERED.get(index, set())


def _json_type(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        items = _json_type(value[0]) if value else {}
        return {"type": "array", "items": items}
    if isinstance(value, dict):
        return {"type": "object"}
    return {}


def schemas_for(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if "schemas" in case:
        given: dict[str, dict[str, Any]] = case["schemas"]
        return given
    out: dict[str, dict[str, Any]] = {}
    for call in case["expected"]:
        args = call["arguments"]
        if not isinstance(args, dict):
            continue
        props = out.setdefault(call["name"], {"type": "object", "properties": {}})["properties"]
        for key, value in args.items():
            props[key] = _json_type(value)
    return out


def collapse(text: str) -> str:
    return " ".join(text.split())


def comparable_content(parsed: ParsedText) -> str:
    """Non-call text the way the fixtures write it: runs stripped, joined by newlines."""
    return "\n".join(r.strip() for r in parsed.text_runs() if r.strip())


def call_list(parsed: ParsedText) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in parsed.calls]


def _stream(
    text: str, chunks: Iterable[str], allowed: set[str], schemas: Any, fmt: str | None = None
) -> ParsedText:
    parser = StreamingToolParser(allowed, schemas, fmt=fmt)
    for chunk in chunks:
        parser.feed(chunk)
    parser.finish()
    return parser.result()


@dataclass
class Outcome:
    index: int
    fmt: str
    positive: bool
    calls_ok: bool
    content_ok: bool | None  # None: the case has no expected_content
    stream_ok: bool
    got: list[tuple[str, Any]]


def evaluate(index: int, case: dict[str, Any]) -> Outcome:
    allowed = allowed_for(index, case)
    schemas = schemas_for(case)
    text = case["text"]
    fmt = case.get("prompt_format")
    whole = _stream(text, [text], allowed, schemas, fmt)
    got = call_list(whole)
    want = [(c["name"], c["arguments"]) for c in case["expected"]]
    content_ok: bool | None = None
    if case["expected_content"] is not None:
        content_ok = collapse(comparable_content(whole)) == collapse(case["expected_content"])
    splits = [case["chunks"]] if case.get("chunks") else []
    for size in (7, 3):
        splits.append([text[i : i + size] for i in range(0, len(text), size)])
    splits.append(list(text))
    stream_ok = True
    for chunks in splits:
        streamed = _stream(text, chunks, allowed, schemas, fmt)
        if call_list(streamed) != got or streamed.content != whole.content:
            stream_ok = False
        if streamed.thinking != whole.thinking:
            stream_ok = False
    return Outcome(index, case["format"], bool(want), got == want, content_ok, stream_ok, got)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    path = Path(args[0]) if args else None
    cases = load_cases(path)
    outcomes = [evaluate(i, c) for i, c in enumerate(cases)]
    rows: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        rows[o.fmt].append(o)
    rows["ALL"] = outcomes
    header = f"{'format':<17}{'positives exact':>17}{'negatives clean':>17}"
    header += f"{'content kept':>15}{'streaming equal':>17}"
    print(header)
    print("-" * len(header))
    for fmt in sorted(rows, key=lambda f: (f == "ALL", f)):
        group = rows[fmt]
        pos = [o for o in group if o.positive]
        neg = [o for o in group if not o.positive]
        cont = [o for o in group if o.content_ok is not None and o.index not in CONTENT_POLICY]
        if fmt == "ALL":
            print("-" * len(header))

        def frac(ok: int, n: int) -> str:
            return f"{ok}/{n}" + (f" {100 * ok / n:5.1f}%" if n else "       ")

        print(
            f"{fmt:<17}{frac(sum(o.calls_ok for o in pos), len(pos)):>17}"
            f"{frac(sum(o.calls_ok for o in neg), len(neg)):>17}"
            f"{frac(sum(bool(o.content_ok) for o in cont), len(cont)):>15}"
            f"{frac(sum(o.stream_ok for o in group), len(group)):>17}"
        )
    print(
        f"\ncontent: {len(CONTENT_POLICY)} cases excluded by documented policy "
        f"({', '.join(str(i) for i in CONTENT_POLICY)}); streaming: each case fed in its "
        "recorded chunks (if any), 7-, 3- and 1-char chunks"
    )
    if "--failures" in argv:
        for o in outcomes:
            bad = not o.calls_ok or o.content_ok is False or not o.stream_ok
            if bad:
                case = cases[o.index]
                print(
                    f"\n#{o.index} {o.fmt} calls_ok={o.calls_ok} content_ok={o.content_ok} "
                    f"stream_ok={o.stream_ok}\n  got={o.got}\n  want={case['expected']}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
