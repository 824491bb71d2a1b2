"""Test plugin for the multi-process tests: `/echo TEXT` answers TEXT after `echo.delay`
seconds (a turn long enough for a SIGKILL to land in it; `echo.slow` seconds for a text
starting with "slow"), with the worker's pid."""

import asyncio
import os

from pydantic import BaseModel

from function_calls import FunctionResult, MessageContext, Plugin, tool_function


class EchoSettings(BaseModel):
    delay: float = 0.0
    slow: float = 0.0


plugin = Plugin("echo", settings=EchoSettings)


class EchoArgs(BaseModel):
    text: str


@tool_function(name="echo", description="Say the text back.", scope="both")
async def echo(ctx: MessageContext, args: EchoArgs) -> FunctionResult:
    settings = ctx.settings(EchoSettings)
    delay = settings.slow if args.text.startswith("slow") and settings.slow else settings.delay
    if delay:
        await asyncio.sleep(delay)
    return FunctionResult(messages=[f"{args.text} pid={os.getpid()}"])
