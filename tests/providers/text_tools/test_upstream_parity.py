"""Issue 34 item 5: the GLM, Hermes, DeepSeek(-R1) and Llama 3 JSON parser tests of vLLM, SGLang
and llama.cpp, as collected again into tests/fixtures/text_tool_calls/upstream_2026d.jsonl,
run against our parser.

Every vector must give exactly its expected calls and non-call text, whole and streamed (in the
chunks the upstream test fed, and in 7-, 3- and 1-character chunks), or be a policy difference
that its note documents ("policy: ..."). A vector with `streamed_content` also checks what was
streamed as text *before* the reply ended: upstream tests assert it mid-stream, and it is the
property that plain text goes out at once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from providers.text_tools.parser import StreamingToolParser
from providers.text_tools.report import allowed_for, evaluate, load_cases, schemas_for

FILE = "upstream_2026d.jsonl"
ALL = load_cases()
#: (global index, case): the global index keeps report.py's per-index tables aligned.
CASES = [(i, c) for i, c in enumerate(ALL) if c["file"] == FILE]
DIALECTS = ("glm", "hermes", "deepseek", "llama3_json")


def _label(item: tuple[int, dict[str, Any]]) -> str:
    index, case = item
    return f"{index}-{case['format']}"


def test_every_dialect_has_vectors_from_vllm_and_sglang() -> None:
    sources: dict[str, set[str]] = {d: set() for d in DIALECTS}
    for _, case in CASES:
        repo = case["source"].split(":", 1)[0]
        sources[case["format"]].add(repo)
    for dialect in DIALECTS:
        assert {"vllm-project/vllm", "sgl-project/sglang"} <= sources[dialect], dialect
    counts = Counter(c["format"] for _, c in CASES)
    assert counts["glm"] >= 100 and counts["hermes"] >= 50
    assert counts["deepseek"] >= 30 and counts["llama3_json"] >= 25


def test_every_vector_names_its_upstream_test() -> None:
    for _, case in CASES:
        assert case["note"].startswith(("upstream:", "derived:")), case["note"]
        if case["note"].startswith("upstream:"):
            assert "@" in case["source"] or case["source"].endswith(".py"), case["source"]


@pytest.mark.parametrize("item", CASES, ids=_label)
def test_vector_is_exact_whole_and_streamed(item: tuple[int, dict[str, Any]]) -> None:
    index, case = item
    outcome = evaluate(index, case)
    assert outcome.got == [(c["name"], c["arguments"]) for c in case["expected"]], case["note"]
    assert outcome.content_ok is not False, case["expected_content"]
    assert outcome.stream_ok


STREAMED = [(i, c) for i, c in CASES if "streamed_content" in c]


@pytest.mark.parametrize("item", STREAMED, ids=_label)
def test_text_before_the_end_is_streamed_at_once(item: tuple[int, dict[str, Any]]) -> None:
    index, case = item
    parser = StreamingToolParser(allowed_for(index, case), schemas_for(case))
    shown = ""
    for chunk in case["chunks"]:
        shown += "".join(e.text or "" for e in parser.feed(chunk) if e.type == "text")
    assert shown == case["streamed_content"]


def test_policy_differences_are_few_and_documented() -> None:
    policy = [c for _, c in CASES if "policy:" in c["note"]]
    assert 0 < len(policy) <= 20
    for case in policy:
        assert len(case["note"].split("policy:", 1)[1]) > 60, case["note"]
