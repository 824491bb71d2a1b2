"""Start-up time and peak memory of `python bot.py --channel http`, serving the overhead work.

The bot runs as it would in production: its own process, a config file (an OpenAI-compatible
model at `bench/fake_openai.py`, SQLite storage, the built-ins, one plugin with the pipeline
benchmark's `get_weather`), started with `python bot.py --channel http --config ...`.

Measured:
- **time to /healthz**: from spawning the process to the first 200 from `GET /healthz`
  (polled every 10 ms), median of `--runs` starts;
- **peak RSS**: `VmHWM` from `/proc/<pid>/status` after `--messages` messages were posted to
  `/v1/messages` (each one: the model calls `get_weather`, the function runs, the model answers),
  every message in its own chat, `--concurrency` in flight;
- with `--importtime`, the slowest imports of one start (`python -X importtime`), cumulative;
- with `--raw`, the peak RSS of the raw-SDK loop (the same tool loop hand-written on one
  `AsyncOpenAI`, same messages and concurrency) in a process that imports nothing else.

The serving start is the last of `--runs`: the first start of the fresh database runs the
migrations (Alembic), which a production start does not, so use `--runs 2` or more.

`--without trio` runs the bot as if the named top-level packages were not installed (a
`sitecustomize` on PYTHONPATH makes importing them raise ModuleNotFoundError, what an
uninstalled package does). On the development machine `trio` comes with selenium from the test
extras, and httpcore2 (the openai SDK's HTTP stack) imports it whenever it is importable; a
production install (`pip install chatfn[all]`) lacks it.

    python bench/bench_startup.py                    # 5 starts, 300 messages
    python bench/bench_startup.py --importtime 15    # plus the 15 costliest imports
    python bench/bench_startup.py --without trio     # as a production install would run
    python bench/bench_startup.py --raw              # plus the raw-SDK reference
    python bench/bench_startup.py --raw --messages 1000 --concurrency 200 --latency-ms 200
                                                     # the pipeline benchmark's load (issue 41)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fake_openai import ServerProcess  # noqa: E402

PLUGIN = """
from pydantic import BaseModel, Field

from function_calls import FunctionResult, MessageContext, tool_function


class WeatherArgs(BaseModel):
    city: str = Field(description="City name, e.g. Paris")


@tool_function(name="get_weather", description="Current weather for a city.")
async def get_weather(ctx: MessageContext, args: WeatherArgs) -> FunctionResult:
    return FunctionResult(llm_content='{"city": "%s", "temp_c": 18}' % args.city)
"""


def write_config(folder: Path, model_url: str, port: int) -> Path:
    (folder / "plugins").mkdir()
    (folder / "plugins" / "weather.py").write_text(PLUGIN)
    config = {
        "models": {
            "default": {
                "provider": "openai",
                "base_url": model_url,
                "api_key": "bench",
                "model": "gpt-4o-mini",
                "native_tools": True,
            }
        },
        "storage": {"url": f"sqlite:///{folder / 'bench.db'}"},
        "plugins": {"paths": [str(folder / "plugins")]},
        "logging": {"level": "WARNING"},
        "channels": {"http": {"host": "127.0.0.1", "port": port}},
    }
    path = folder / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


# The raw-SDK reference: the same tool loop (get_weather, then the answer) written by hand on
# one AsyncOpenAI client, in a process of its own that imports nothing else; its peak RSS after
# the same messages at the same concurrency is what the bot is compared with.
RAW_LOOP = """
import asyncio, json, sys
from pathlib import Path
from openai import AsyncOpenAI

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {
        "type": "string", "description": "City name, e.g. Paris"}}, "required": ["city"]}}}]


async def main(url, messages, concurrency):
    client = AsyncOpenAI(api_key="bench", base_url=url, max_retries=2, timeout=60.0)
    sem = asyncio.Semaphore(concurrency)

    async def one(i):
        async with sem:
            history = [{"role": "system", "content": "You are a helpful assistant."},
                       {"role": "user", "content": "Weather in Paris?"}]
            first = await client.chat.completions.create(
                model="gpt-4o-mini", messages=history, tools=TOOLS)
            reply = first.choices[0].message
            history.append({"role": "assistant", "tool_calls": [
                {"id": c.id, "type": "function", "function": {
                    "name": c.function.name, "arguments": c.function.arguments}}
                for c in reply.tool_calls or []]})
            for c in reply.tool_calls or []:
                city = json.loads(c.function.arguments)["city"]
                history.append({"role": "tool", "tool_call_id": c.id,
                                "content": json.dumps({"city": city, "temp_c": 18})})
            second = await client.chat.completions.create(
                model="gpt-4o-mini", messages=history, tools=TOOLS)
            assert second.choices[0].message.content

    await asyncio.gather(*(one(i) for i in range(messages)))
    await client.close()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            print(int(line.split()[1]) / 1024)


asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def raw_peak_mb(url: str, messages: int, concurrency: int, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", RAW_LOOP, url, str(messages), str(concurrency)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    ).stdout
    return float(out.split()[-1])


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthz(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"bot.py exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.01)
    raise TimeoutError("no /healthz")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def serve(port: int, messages: int, concurrency: int) -> None:
    from aiohttp import ClientSession

    sem = asyncio.Semaphore(concurrency)
    async with ClientSession() as session:

        async def one(i: int) -> None:
            async with sem:
                body = {"chat_id": f"c{i}", "sender_id": f"u{i}", "text": "Weather in Paris?"}
                async with session.post(f"http://127.0.0.1:{port}/v1/messages", json=body) as resp:
                    data = await resp.json()
                    if resp.status != 200 or not data.get("replies"):
                        raise RuntimeError(f"bad answer {resp.status}: {data}")

        await asyncio.gather(*(one(i) for i in range(messages)))


HIDE = """
import sys


class _NotInstalled:
    \"\"\"Importing a hidden package fails as if it were not installed.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


def hiding(folder: Path, names: list[str]) -> dict[str, str]:
    """The environment of a bot that cannot import `names` (see the module docstring)."""
    if not names:
        return {}
    site = folder / "hide"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(HIDE.format(names=set(names)))
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def start_bot(
    config: Path,
    port: int,
    extra: list[str] | None = None,
    stderr: Any = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, *(extra or []), "bot.py", "--channel", "http", "--config", str(config)]
    cmd += ["--port", str(port)]
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr, env={**os.environ, **(env or {})}
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def importtime(config: Path, top: int, env: dict[str, str]) -> list[tuple[float, str]]:
    port = free_port()
    # A file, not a pipe: -X importtime writes more than a pipe buffer before /healthz answers.
    with tempfile.TemporaryFile() as err:
        proc = start_bot(config, port, ["-X", "importtime"], stderr=err, env=env)
        try:
            wait_healthz(port, proc)
        finally:
            stop(proc)
        err.seek(0)
        text = err.read().decode(errors="replace")
    rows = []
    for line in text.splitlines():
        if line.startswith("import time:") and "|" in line:
            _self, cumulative, name = line[len("import time:") :].split("|", 2)
            if cumulative.strip().isdigit():
                rows.append((int(cumulative) / 1000, name.rstrip()))
    # Top-level packages only (no leading spaces beyond one): what a change can avoid.
    top_level = [(ms, n.strip()) for ms, n in rows if len(n) - len(n.lstrip()) <= 1]
    return sorted(top_level, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="the fake model's answer time (the pipeline benchmark's concurrent run: 200)",
    )
    parser.add_argument("--importtime", type=int, default=0, metavar="TOP")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="run the bot as if this top-level package were not installed (repeatable)",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="also measure the raw-SDK loop's peak RSS (same messages, own process)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    starts: list[float] = []
    result: dict[str, object] = {}
    with ServerProcess(latency_ms=args.latency_ms) as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        port = free_port()
        config = write_config(folder, server.url, port)
        env = hiding(folder, args.without)
        for run in range(args.runs):
            t0 = time.perf_counter()
            proc = start_bot(config, port, env=env)
            try:
                starts.append(wait_healthz(port, proc) - t0)
                idle = rss_mb(proc.pid)
                if run == args.runs - 1:  # serve once, on the last start
                    asyncio.run(serve(port, args.messages, args.concurrency))
                    result["rss_idle_mb"] = round(idle, 1)
                    result["peak_rss_mb"] = round(peak_rss_mb(proc.pid), 1)
            finally:
                stop(proc)
        result["healthz_s_median"] = round(statistics.median(starts), 3)
        result["healthz_s_all"] = [round(s, 3) for s in starts]
        result["messages"] = args.messages
        result["without"] = args.without
        if args.raw:
            result["raw_sdk_peak_rss_mb"] = round(
                raw_peak_mb(server.url, args.messages, args.concurrency, env), 1
            )
        if args.importtime:
            result["importtime_ms"] = [
                [round(ms, 1), n] for ms, n in importtime(config, args.importtime, env)
            ]
    if args.json:
        print(json.dumps(result, indent=2))
        return
    if args.without:
        print(f"without: {', '.join(args.without)}")
    print(
        f"time to /healthz: median {result['healthz_s_median']} s"
        f"  (runs: {result['healthz_s_all']})"
    )
    print(
        f"RSS after start: {result['rss_idle_mb']} MB; "
        f"peak RSS after {args.messages} messages: {result['peak_rss_mb']} MB"
    )
    if args.raw:
        print(f"raw-SDK loop, same messages: peak RSS {result['raw_sdk_peak_rss_mb']} MB")
    for ms, name in result.get("importtime_ms", []):  # type: ignore[union-attr]
        print(f"  {ms:8.1f} ms  {name}")


if __name__ == "__main__":
    main()
