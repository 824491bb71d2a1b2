"""The plugin API: everything a plugin (and every built-in) needs, in one import line.

    from function_calls import tool_function, MessageContext, FunctionResult

The modules behind these names (`function_calls.registry`, `.context`, `.spec`, `.plugin`) stay
importable, but this is the front door; built-ins use nothing else. A function asks a model
with `await ctx.ask_model(...)` (`ask_model(ctx, ...)` is the same), counted like the chat's
own turns (function_calls/model_access.py); the models refuse requests made any other way.
A URL a user gave is fetched with `await fetch(url, allow=ctx.config.bot.fetch, ...)`
(chatfn/common/fetch.py: internal addresses refused, size and time bounded), and blocking
work goes to `await run_blocking(func, ...)`, a thread pool kept apart from the bot's own.
"""

from chatfn.common.blocking import run_blocking
from chatfn.common.chat_keys import ChatKey
from chatfn.common.config import ConfigError, ConfigPath, CoreSettings, Section, zone_named
from chatfn.common.fetch import (
    FetchAllow,
    Fetched,
    FetchError,
    FetchFailed,
    FetchRefused,
    FetchStatus,
    FetchTooLarge,
    FetchTooSlow,
    FetchWrongType,
    IPNetwork,
    fetch,
)
from chatfn.common.i18n import UNIT_SECONDS, WEEKDAY_NAMES, language_of, translate
from chatfn.common.messages import IncomingMessage, OutgoingMessage, SystemEvent
from chatfn.storage.create_missing import create_missing
from chatfn.storage.db import Storage, StorageError, StoredMessage
from function_calls.approvals import Approvals
from function_calls.caller import Caller
from function_calls.chat_settings import ChatSettings
from function_calls.console import (
    ConsoleCall,
    ConsoleRefused,
    ConsoleRoute,
    ConsoleScope,
    ConsoleView,
    HealthList,
)
from function_calls.context import MessageContext, ModelRequest
from function_calls.fates import MessageFate, MessageFates
from function_calls.limits import Budget, LimitReached, budget_today
from function_calls.model_access import ask_model
from function_calls.plugin import CheckLine, Metric, Plugin, PluginHost, Status
from function_calls.plugin_data import PluginConnection, PluginDatabase, TableRefused
from function_calls.plugin_ddl import Fts5, Fts5Vocab, Vec0
from function_calls.programs import ProgramCaller
from function_calls.registry import FunctionDefinitionError, schema_function, tool_function
from function_calls.spec import FunctionResult, FunctionSpec, InvalidArguments
from function_calls.tables import Tables
from providers.base import ChatModel
from providers.errors import ProviderError
from providers.types import LLMResponse, Message

__all__ = [
    "Approvals",
    "Budget",
    "Caller",
    "ChatKey",
    "CheckLine",
    "ConsoleCall",
    "ConsoleRefused",
    "ConsoleRoute",
    "ConsoleScope",
    "ConsoleView",
    "ChatModel",
    "FunctionDefinitionError",
    "HealthList",
    "ProgramCaller",
    "Fts5",
    "Fts5Vocab",
    "ChatSettings",
    "FunctionResult",
    "FunctionSpec",
    "IncomingMessage",
    "InvalidArguments",
    "LimitReached",
    "LLMResponse",
    "Message",
    "Metric",
    "MessageContext",
    "MessageFate",
    "MessageFates",
    "ModelRequest",
    "OutgoingMessage",
    "Plugin",
    "PluginConnection",
    "PluginDatabase",
    "PluginHost",
    "ProviderError",
    "ConfigError",
    "FetchAllow",
    "Fetched",
    "FetchError",
    "FetchFailed",
    "FetchRefused",
    "FetchStatus",
    "FetchTooLarge",
    "FetchTooSlow",
    "FetchWrongType",
    "IPNetwork",
    "ConfigPath",
    "CoreSettings",
    "Section",
    "Status",
    "Storage",
    "Tables",
    "TableRefused",
    "Vec0",
    "StorageError",
    "ask_model",
    "budget_today",
    "create_missing",
    "fetch",
    "run_blocking",
    "UNIT_SECONDS",
    "WEEKDAY_NAMES",
    "StoredMessage",
    "SystemEvent",
    "language_of",
    "schema_function",
    "tool_function",
    "translate",
    "zone_named",
]
