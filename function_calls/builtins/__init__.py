"""The built-in plugins. Each package here is written with the public plugin API only
(`from function_calls import ...`), exactly as a third-party plugin would be: its functions,
its service, its settings section and its tables live together in the package."""

#: Loaded by the runtime before the user's plugins, in this order.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "function_calls.builtins.help",
    "function_calls.builtins.reminders",
    "function_calls.builtins.web_search",
    "function_calls.builtins.summary",
    "function_calls.builtins.welcome",
    "function_calls.builtins.mcp",
    "function_calls.builtins.chat_admin",
    "function_calls.builtins.knowledge",
    "function_calls.builtins.why",
    "function_calls.builtins.approvals",
)

#: Built-ins `plugins.disabled` and the console cannot switch off: the core's own replies point
#: to `/help` (an unknown command, a bot without a model, the web page's input). Every other
#: built-in is switched off as an installed plugin is (`plugins.disabled: [reminders]`).
REQUIRED_BUILTINS: tuple[str, ...] = ("function_calls.builtins.help",)
