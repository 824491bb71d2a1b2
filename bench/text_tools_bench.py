"""Throughput and scaling of the prompt-mode tool-call parser (providers/text_tools).

    python bench/text_tools_bench.py [rounds]

Builds replies of 10 KB, 100 KB and 1 MB mixing prose, code fences, a think block, bare braces,
marker look-alikes and tool calls in several dialects (Hermes, XML tag, pythonic, Llama 3 JSON,
harmony, MiniMax-M2, FunctionGemma, Gemma tool_code, MiniCPM5 with CDATA), and times the
parser fed whole and in 16-byte chunks (as a token stream arrives). Linear work shows as a
time ratio of ~10x per 10x size. Times are the best of several interleaved rounds (every size
and mode in each round), with
and without the cyclic GC: on a loaded machine single runs vary by 2x.
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
    "<start_function_call>call:get_weather{{city:<escape>Paris {n}<escape>}}<end_function_call>\n",
    "```tool_code\nweb_search(query='news {n}', max_results=2)\n```\n",
    '<function name="reminder_set"><param name="text"><![CDATA[tea </param> {n}]]></param>'
    "</function>\n",
    "all\nnot a header here, to=functions.x {n} <|channel|>commentary to=assistant prose.\n",
]
#: Blocks (by index) that hold one call.
CALL_BLOCKS = (1, 3, 5, 6, 7, 8, 10, 11, 12)


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
    """CPU seconds of this thread for one parse. CPU time, not wall time: with 5+ jobs on 2
    cores a 0.5 s run is preempted many times while a 2 ms run often is not, so wall-time
    ratios between sizes measure the load, not the parser."""
    start = time.thread_time()
    parser = StreamingToolParser(ALLOWED)
    if chunk is None:
        parser.feed(text)
    else:
        for i in range(0, len(text), chunk):
            parser.feed(text[i : i + chunk])
    parser.finish()
    elapsed = time.thread_time() - start
    return elapsed, len(parser.result().calls)


def timed(text: str, chunk: int | None, with_gc: bool) -> tuple[float, int]:
    """One run from a collected heap; without GC, the cyclic collector is off during the run
    (it walks every live object, and a 1 MB reply keeps thousands of calls and segments alive,
    so its cost per run grows with everything else alive in the process)."""
    gc.collect()
    if not with_gc:
        gc.disable()
    try:
        return run(text, chunk)
    finally:
        gc.enable()


def main() -> None:
    """Best of N interleaved rounds: each round times every size, fed whole and chunked, with
    and without GC, so a burst of load from other jobs hits all sizes alike instead of one."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [("10 KB", 10_000), ("100 KB", 100_000), ("1 MB", 1_000_000)]
    replies = {label: make_reply(size) for label, size in sizes}
    modes = [(None, True), (16, True), (None, False), (16, False)]
    best: dict[tuple[str, int | None, bool], float] = {}
    for _ in range(rounds):
        for label, _size in sizes:
            text, expected = replies[label]
            # Small replies are timed as the best of several back-to-back runs per round.
            inner = 20 if len(text) <= 20_000 else 3 if len(text) <= 200_000 else 1
            for chunk, with_gc in modes:
                for _ in range(inner):
                    elapsed, calls = timed(text, chunk, with_gc)
                    assert calls == expected, (label, chunk, calls, expected)
                    key = (label, chunk, with_gc)
                    best[key] = min(best.get(key, elapsed), elapsed)
    print(
        f"{'reply':<8}{'calls':>7}{'whole (cpu s)':>15}{'16-B chunks':>13}{'whole MB/s':>12}"
        f"{'chunked MB/s':>14}{'whole, no GC':>14}{'chunked, no GC':>16}"
    )
    for label, _size in sizes:
        text, expected = replies[label]
        mb = len(text.encode()) / 1e6
        w, c = best[(label, None, True)], best[(label, 16, True)]
        wn, cn = best[(label, None, False)], best[(label, 16, False)]
        print(
            f"{label:<8}{expected:>7}{w:>15.4f}{c:>13.4f}{mb / w:>12.1f}{mb / c:>14.1f}"
            f"{wn:>14.4f}{cn:>16.4f}"
        )

    def ratio(chunk: int | None, with_gc: bool) -> float:
        return best[("1 MB", chunk, with_gc)] / best[("10 KB", chunk, with_gc)]

    print(
        f"1 MB vs 10 KB (best of {rounds} interleaved rounds): whole {ratio(None, True):.0f}x, "
        f"chunked {ratio(16, True):.0f}x; without GC: whole {ratio(None, False):.0f}x, chunked "
        f"{ratio(16, False):.0f}x (linear: 100x; criterion <= 120x)"
    )


if __name__ == "__main__":
    main()
