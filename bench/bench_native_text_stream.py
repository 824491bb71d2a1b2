"""CPU the native-mode text filter adds to a streamed answer with no call in it.

    python bench/bench_native_text_stream.py [rounds]

In native mode every streamed answer goes through `NativeTextFilter` (function_calls/
text_calls.py) so a call the model writes as text is never shown. This times a plain answer
(prose, a list, a code block: no call) fed as a token stream arrives (4-character chunks)
through the filter, against the same events passed on untouched, for answers of 500 B, 4 KB
and 32 KB, in CPU seconds of the thread (`time.thread_time`), best of interleaved rounds. The
figure that matters is the time per answer next to a model's latency (hundreds of ms).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from function_calls.text_calls import NativeTextFilter  # noqa: E402
from providers.types import LLMResponse, StreamEvent, ToolDefinition  # noqa: E402

TOOLS = [
    ToolDefinition(f"tool_{i}", "A function.", {"type": "object", "properties": {}})
    for i in range(20)
]
PARA = (
    "The weather in Oslo is mild today, around 12°C with light wind from the west. "
    "Here is a list:\n- bring a jacket\n- an umbrella if x < 3 or y > 4\n"
    "```python\nprint({'a': 1, 'b': [1, 2]})\n```\n"
)


def events(size: int) -> list[StreamEvent]:
    text = (PARA * (size // len(PARA) + 1))[:size]
    return [StreamEvent(type="text", text=text[i : i + 4]) for i in range(0, len(text), 4)]


def passthrough(evs: list[StreamEvent]) -> int:
    n = 0
    for e in evs:
        for _shown in (e,):
            n += 1
    return n


def filtered(evs: list[StreamEvent]) -> int:
    f = NativeTextFilter(TOOLS)
    n = 0
    for e in evs:
        n += len(f.feed(e))
    rest, _ = f.finish(LLMResponse(content=""))
    return n + len(rest)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    filtered(events(100))  # import the parser outside the timing
    for size in (500, 4_000, 32_000):
        evs = events(size)
        best = {"passthrough": float("inf"), "filter": float("inf")}
        for _ in range(rounds):
            for name, fn in (("passthrough", passthrough), ("filter", filtered)):
                t = time.thread_time()
                fn(evs)
                best[name] = min(best[name], time.thread_time() - t)
        added = best["filter"] - best["passthrough"]
        print(
            f"{size:>6} B, {len(evs):>5} chunks: filter {best['filter'] * 1e3:7.3f} ms, "
            f"passthrough {best['passthrough'] * 1e3:6.3f} ms, added {added * 1e6:8.0f} us "
            f"({added / len(evs) * 1e6:.2f} us/chunk)"
        )


if __name__ == "__main__":
    main()
