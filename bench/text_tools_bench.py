"""Throughput and scaling of the prompt-mode tool-call parser (providers/text_tools).

    python bench/text_tools_bench.py

Builds replies of 10 KB, 100 KB and 1 MB mixing prose, code fences, a think block, bare braces,
marker look-alikes and tool calls in several dialects (Hermes, XML tag, pythonic, Llama 3 JSON,
harmony, MiniMax-M2), and times the parser fed whole and in 16-byte chunks (as a
token stream arrives). Linear work shows as a time ratio of ~10x per 10x size. Times are the
best of several runs: on a loaded machine single runs vary by 2x.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from providers.text_tools.parser import StreamingToolParser  # noqa: E402

ALLOWED = {"reminder_set", "web_search", "get_weather"}
BLOCKS = [
    "Here is what I found about the weather in {n}. It looks {n} degrees [see note] and mild. ",
    'Let me set that.<tool_call>{{"name": "reminder_set", "arguments": {{"at": "09:{n:02d}", '
    '"text": "tea"}}}}</tool_call>\n',
    "Some code:\n```python\ndef f(x):\n    return {{'a': x, 'n': {n}}}  # <tool_call> here\n```\n",
    '<tool name="web_search">{{"query": "item {n}", "max_results": 3}}</tool>\n',
    "A set {{1, 2}} and a list [1, 2] and <b>bold</b> text, {n} times. ",
    "[get_weather(city='Paris', day={n})] then more prose follows here. ",
    '{{"name": "get_weather", "parameters": {{"city": "Rome {n}"}}}}\n',
    "<|channel|>analysis<|message|>想一想 {n}.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{{"city": "东京 {n}"}}<|call|>\n',
    '<minimax:tool_call>\n<invoke name="web_search">\n<parameter name="query">新闻 {n}'
    "</parameter>\n</invoke>\n</minimax:tool_call>\n",
    "Action: none yet; >>> is a prompt, functools a module, <|channel|> a token {n}.\n",
]
#: Blocks (by index) that hold one call.
CALL_BLOCKS = (1, 3, 5, 6, 7, 8)


def make_reply(size: int) -> tuple[str, int]:
    parts = ["<think>Planning the answer step by step. </think>"]
    total = len(parts[0])
    n = 0
    calls = 0
    while total < size:
        block = BLOCKS[n % len(BLOCKS)].format(n=n % 60)
        calls += n % len(BLOCKS) in CALL_BLOCKS
        parts.append(block)
        total += len(block)
        n += 1
    return "".join(parts), calls


def run(text: str, chunk: int | None) -> tuple[float, int]:
    start = time.perf_counter()
    parser = StreamingToolParser(ALLOWED)
    if chunk is None:
        parser.feed(text)
    else:
        for i in range(0, len(text), chunk):
            parser.feed(text[i : i + chunk])
    parser.finish()
    elapsed = time.perf_counter() - start
    return elapsed, len(parser.result().calls)


def best_of(text: str, chunk: int | None, repeat: int) -> tuple[float, int]:
    results = [run(text, chunk) for _ in range(repeat)]
    return min(r[0] for r in results), results[0][1]


def best_without_gc(text: str, chunk: int | None, repeat: int) -> float:
    """The parser's own work, without Python's cyclic GC (which walks every live object, and a
    1 MB reply with 7,000 calls keeps many alive)."""
    gc.collect()
    gc.disable()
    try:
        return best_of(text, chunk, repeat)[0]
    finally:
        gc.enable()


def main() -> None:
    sizes = [("10 KB", 10_000), ("100 KB", 100_000), ("1 MB", 1_000_000)]
    print(
        f"{'reply':<8}{'calls':>7}{'whole (s)':>12}{'16-B chunks (s)':>17}{'whole MB/s':>12}"
        f"{'chunked MB/s':>14}{'whole, no GC':>14}{'chunked, no GC':>16}"
    )
    base: tuple[float, ...] | None = None
    ratios = []
    for label, size in sizes:
        text, expected = make_reply(size)
        repeat = 25 if size <= 10_000 else 7 if size <= 100_000 else 4
        whole, calls = best_of(text, None, repeat)
        chunked, calls_chunked = best_of(text, 16, repeat)
        assert calls == calls_chunked == expected, (calls, calls_chunked, expected)
        whole_ng = best_without_gc(text, None, repeat)
        chunked_ng = best_without_gc(text, 16, repeat)
        mb = len(text.encode()) / 1e6
        print(
            f"{label:<8}{calls:>7}{whole:>12.4f}{chunked:>17.4f}{mb / whole:>12.1f}"
            f"{mb / chunked:>14.1f}{whole_ng:>14.4f}{chunked_ng:>16.4f}"
        )
        times = (whole, chunked, whole_ng, chunked_ng)
        if base is not None:
            ratios.append((label, *(t / b for t, b in zip(times, base, strict=True))))
        base = times
    if len(ratios) == 2:
        (_, a, b, c, d), (_, e, f, g, h) = ratios
        print(
            f"1 MB vs 10 KB: whole {a * e:.0f}x, chunked {b * f:.0f}x; without GC: whole "
            f"{c * g:.0f}x, chunked {d * h:.0f}x (linear: 100x)"
        )
    for label, rw, rc, rwn, rcn in ratios:
        print(
            f"time ratio to the 10x smaller reply at {label}: whole {rw:.1f}x, chunked "
            f"{rc:.1f}x; without GC: whole {rwn:.1f}x, chunked {rcn:.1f}x"
        )


if __name__ == "__main__":
    main()
