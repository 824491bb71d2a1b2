"""Runs one function call: authorisation (again), argument validation, timeout, exception
capture, and an audit row. Every outcome becomes a short text the model can act on; nothing a
handler does can crash the bot."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from chatfn.common.blocking import run_blocking
from chatfn.common.i18n import CATALOGUES, translate
from chatfn.storage.db import tool_call_row
from function_calls.approvals import Approvals, may_approve
from function_calls.context import MessageContext
from function_calls.journal import TurnJournal
from function_calls.limits import LimitReached
from function_calls.permissions import refusal_reason
from function_calls.registry import Registry
from function_calls.spec import FunctionResult, FunctionSpec, InvalidArguments
from providers.schema import drop_absent_nulls
from providers.types import parse_arguments

# "held": an `approval` function's call, not run until an approver answers
# (function_calls/approvals.py); the caller asks for the approval.
Outcome = Literal["ok", "invalid", "refused", "unknown", "timeout", "error", "held"]


@dataclass(slots=True)
class Execution:
    name: str
    outcome: Outcome
    result: FunctionResult | None
    # What the model gets back as the tool result.
    model_text: str
    # The same outcome for a person (a slash-command user): no instructions meant for the model.
    reason: str = ""
    duration_ms: float = 0.0
    # A held call's arguments, validated (as JSON values): what runs once it is approved.
    arguments: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def _error_text(err: Any, language: str) -> str:
    """One pydantic error in `language`: the catalogue's `invalid.<type>` when it has one
    (filled from the error's context), else pydantic's own English message."""
    key = f"invalid.{err['type']}"
    if key in CATALOGUES["en"]:
        try:
            return translate(language, key, **(err.get("ctx") or {}))
        except (KeyError, IndexError, ValueError):  # a context this text does not expect
            pass
    return str(err["msg"])


def format_validation_error(name: str, exc: ValidationError, language: str = "en") -> str:
    """`Invalid arguments for NAME: field: problem; ...` in `language`."""
    parts = []
    separator = "；" if language == "zh" else "; "
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{loc}: {_error_text(err, language)}")
    return translate(language, "core.invalid_args", name=name, details=separator.join(parts))


class FunctionExecutor:
    def __init__(self, registry: Registry, *, default_timeout: float = 30.0) -> None:
        self.registry = registry
        self.default_timeout = default_timeout
        # Told of every call `execute` ran, after it ran (the plugins' circuit breakers).
        self.observers: list[Callable[[Execution], None]] = []

    async def execute(
        self,
        ctx: MessageContext,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        source: str = "llm",
        approved: bool = False,
    ) -> Execution:
        """Run one call. `approved`: an `approval` function's call an approver said yes to
        (function_calls/approvals.py); otherwise such a call is held, not run."""
        started = time.perf_counter()
        execution = await self._run(ctx, name, arguments, source, approved)
        execution.duration_ms = (time.perf_counter() - started) * 1000
        for observe in self.observers:
            observe(execution)
        await self.audit(ctx, execution, arguments, source=source)
        return execution

    async def rehearse(
        self, ctx: MessageContext, name: str, arguments: dict[str, Any] | str
    ) -> Execution:
        """Run a call as `execute` does but off the record (no audit row, no observers):
        `chatfn replay` runs a `pure` function again on a recorded turn, which must leave the
        bot's audit and its plugins' breakers as they were."""
        return await self._run(ctx, name, arguments, "llm")

    async def audit(
        self,
        ctx: MessageContext,
        execution: Execution,
        arguments: dict[str, Any] | str,
        *,
        source: str,
    ) -> None:
        """The audit row, metric and log line of one call: every call `execute` runs, and a
        call refused before it gets there (an MCP client naming a function `mcp.expose`
        hides), so every refused call is on record."""
        name = execution.name
        msg = ctx.message
        row = tool_call_row(
            platform=msg.platform,
            chat_id=msg.chat_id,
            sender_id=msg.sender_id,
            message_id=msg.message_id,
            function=name,
            arguments=arguments,
            source=source,
            outcome=execution.outcome,
            # What the model was told: the result (kept for audits, and for the summary of
            # compacted turns), or what went wrong.
            detail=execution.model_text,
            duration_ms=execution.duration_ms,
        )
        # The turn's write of this tool round: the audit row with what the turn has not
        # written yet (usage rows, limit counts, its messages out), one transaction, off the
        # event loop (function_calls/journal.py).
        journal = ctx.turn.journal or TurnJournal(ctx.turn.storage, msg.platform, msg.chat_id)
        try:
            await journal.write(tool_call=row)
        except Exception as exc:  # the audit log must never take the reply down with it
            ctx.logger.error("audit row for {} not written: {}", name, exc)
        if ctx.turn.metrics is not None:
            ctx.turn.metrics.tool_calls.labels(name, execution.outcome).inc()
        level = "INFO" if execution.ok else "WARNING"
        ctx.logger.log(
            level,
            "call {} via {} -> {} in {:.1f} ms",
            name,
            source,
            execution.outcome,
            execution.duration_ms,
        )

    async def _run(
        self,
        ctx: MessageContext,
        name: str,
        arguments: dict[str, Any] | str,
        source: str,
        approved: bool = False,
    ) -> Execution:
        spec = self.registry.get(name)
        if spec is None:
            return Execution(
                name,
                "unknown",
                None,
                f"Unknown function {name!r}. Use only the functions you were given.",
            )
        reason = refusal_reason(spec, ctx, via_command=source == "command")
        if reason is not None:
            return Execution(
                name,
                "refused",
                None,
                f"Refused: {reason}. Do not retry; tell the user if relevant.",
                reason=ctx.t("core.sentence", text=reason),
            )
        try:
            args = self._validate(spec, arguments)
        # The model reads English instructions; the person sees the chat's language.
        except ValidationError as exc:
            text = format_validation_error(name, exc)
            shown = format_validation_error(name, exc, ctx.language)
            return Execution(
                name, "invalid", None, f"{text} Fix them and call again.", reason=shown
            )
        except InvalidArguments as exc:
            text = f"Invalid arguments for {name}: {exc}."
            shown = ctx.t("core.invalid_args", name=name, details=exc)
            return Execution(
                name, "invalid", None, f"{text} Fix them and call again.", reason=shown
            )
        except ValueError as exc:
            text = f"Invalid arguments for {name}: {exc}."
            shown = ctx.t("core.invalid_args", name=name, details=exc)
            return Execution(name, "invalid", None, f"{text} Send a JSON object.", reason=shown)
        if spec.approval is not None and not approved:
            held = self._hold(spec, ctx, arguments, source)
            if held is not None:
                return held
        # The function's own declared timeout wins (summary needs 60 s to fall back to its
        # extract); call_timeout is the default for functions that declare none.
        timeout = spec.timeout if spec.timeout is not None else self.default_timeout
        try:
            async with asyncio.timeout(timeout):
                result = await self._call(spec, ctx, args)
        except TimeoutError:
            return Execution(name, "timeout", None, f"{name} did not finish within {timeout:g} s.")
        except LimitReached as exc:  # the function asked a model over a limit: refused
            refusal = exc.refusal
            return Execution(
                name,
                "refused",
                None,
                f"Refused: {refusal.text} Do not retry; tell the user.",
                # Said once per window, like a refused message; then the bot stays silent.
                reason=refusal.text if refusal.notify else "",
            )
        except Exception as exc:
            ctx.logger.opt(exception=exc).error("function {} raised", name)
            return Execution(
                name, "error", None, f"{name} failed: {type(exc).__name__}: {str(exc)[:300]}"
            )
        if not isinstance(result, FunctionResult):
            if isinstance(result, str):
                result = FunctionResult(messages=[result])
            elif result is None:
                result = FunctionResult()
            else:
                return Execution(
                    name,
                    "error",
                    None,
                    f"{name} returned {type(result).__name__}, not FunctionResult",
                )
        if result.is_error:
            text = result.content_for_model()
            return Execution(name, "error", result, f"{name} failed: {text}", reason=text)
        return Execution(name, "ok", result, result.content_for_model())

    @staticmethod
    def _hold(
        spec: FunctionSpec, ctx: MessageContext, arguments: dict[str, Any] | str, source: str
    ) -> Execution | None:
        """An `approval` function's call, held (None: it runs now: a slash command of someone
        who may approve it). Its arguments are kept as they were validated: they run as they
        are, or not at all."""
        if source == "command" and may_approve(spec.approval or "admin", ctx):
            return None
        if ctx.service(Approvals) is None:  # a bot without the runtime's record of them
            return Execution(
                spec.name,
                "refused",
                None,
                f"Refused: {spec.name} needs an approval, which this bot cannot ask for.",
                reason=ctx.t("core.approval.unavailable", function=spec.name),
            )
        raw = parse_arguments(arguments) if isinstance(arguments, str) else arguments
        raw = drop_absent_nulls(spec.parameters_schema, raw)
        return Execution(
            spec.name,
            "held",
            None,
            f"Held: {spec.name} waits for an approver's answer.",
            arguments=json.loads(json.dumps(raw, default=str)),
        )

    @staticmethod
    def _validate(spec: FunctionSpec, arguments: dict[str, Any] | str) -> Any:
        if isinstance(arguments, str):
            arguments = parse_arguments(arguments)
        if not isinstance(arguments, dict):
            raise ValueError("arguments must be a JSON object")
        # The model was shown these fields without null (their optional form): a null it
        # sends anyway means "not given", exactly as the default says.
        arguments = drop_absent_nulls(spec.parameters_schema, arguments)
        if spec.validator is not None:
            return spec.validator(arguments)
        if spec.args_model is None:
            return None
        return spec.args_model.model_validate(arguments)

    @staticmethod
    async def _call(spec: FunctionSpec, ctx: MessageContext, args: Any) -> Any:
        takes_args = spec.args_model is not None or spec.validator is not None
        call_args = (ctx, args) if takes_args else (ctx,)
        if spec.is_async:
            return await spec.handler(*call_args)
        # Sync handlers may block (I/O): off the event loop, and on the pool for user work
        # (chatfn/common/blocking.py), so handlers that hang, which a timeout cannot stop,
        # hold up only other sync handlers, never asyncio's default executor.
        return await run_blocking(spec.handler, *call_args)
