"""`@tool_function` and the registries it writes to.

A decorated function is registered into the *active* registry: the global one, unless a
`Registry.collecting()` block (used when loading plugins for a specific bot or test) says
otherwise. Every mistake a developer can make in a declaration fails at import time with the
function's name and file, because a bot that starts and then breaks on first use is worse.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from function_calls.spec import Approval, FunctionSpec, InvalidArguments, Scope

if TYPE_CHECKING:
    from function_calls.caller import Caller

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI, Anthropic and Gemini accept
SPEC_ATTR = "__chatfn_spec__"


class FunctionDefinitionError(Exception):
    """A `@tool_function` declaration that cannot work (bad name, signature, duplicate)."""


class PluginLoadError(Exception):
    """A plugin file failed to import; the message names the file and the cause."""


class Registry:
    """An ordered set of FunctionSpecs keyed by name.

    Copy-on-write: every change makes a new mapping, so `pinned()` (one turn, chatfn's
    runtime) keeps reading the set it started with while a plugin is switched on, off or
    reloaded meanwhile; the next turn sees the new set whole, never half of a change."""

    def __init__(self) -> None:
        self._live: dict[str, FunctionSpec] = {}
        self._pin: contextvars.ContextVar[dict[str, FunctionSpec] | None] = contextvars.ContextVar(
            f"registry_pin_{id(self):x}", default=None
        )

    @property
    def _specs(self) -> dict[str, FunctionSpec]:
        pinned = self._pin.get()
        return self._live if pinned is None else pinned

    @contextlib.contextmanager
    def pinned(self) -> Iterator[Registry]:
        """Inside the block (and the tasks it starts) this registry reads as it is now."""
        token = self._pin.set(self._live)
        try:
            yield self
        finally:
            self._pin.reset(token)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def get(self, name: str) -> FunctionSpec | None:
        return self._specs.get(name)

    def all(self) -> list[FunctionSpec]:
        return list(self._specs.values())

    def add(self, spec: FunctionSpec) -> FunctionSpec:
        self.replace([], [spec])
        return spec

    def remove(self, name: str) -> FunctionSpec | None:
        """Drop a function added at runtime (an MCP server's tool that went away)."""
        found = self._live.get(name)
        if found is not None:
            self.replace([name], [])
        return found

    def replace(self, names: list[str], specs: list[FunctionSpec]) -> None:
        """Drop the functions `names` and add `specs`, as one change (a plugin reloaded)."""
        live = {k: v for k, v in self._live.items() if k not in set(names)}
        for spec in specs:
            existing = live.get(spec.name)
            if existing is not None and existing.handler is not spec.handler:
                raise FunctionDefinitionError(
                    f"duplicate function name {spec.name!r}: defined at {existing.source} "
                    f"and again at {spec.source}"
                )
            live[spec.name] = spec
        self._live = live

    def include(self, module: types.ModuleType) -> int:
        """Register every decorated function of an already-imported module (built-ins)."""
        count = 0
        for value in vars(module).values():
            spec = getattr(value, SPEC_ATTR, None)
            if isinstance(spec, FunctionSpec):
                self.add(spec)
                count += 1
        return count

    @contextlib.contextmanager
    def collecting(self) -> Iterator[Registry]:
        """Make this registry the target of `@tool_function` inside the block."""
        token = _active.set(self)
        try:
            yield self
        finally:
            _active.reset(token)

    def load_plugins(self, paths: list[str | Path], base_dir: Path | None = None) -> list[Path]:
        """Import every plugin file under `paths` into this registry; returns the files."""
        files = plugin_files(paths, base_dir)
        for file in files:
            self._load_file(file)
        return files

    def _load_file(self, file: Path) -> None:
        self.include(import_plugin_file(file))


def import_plugin_file(file: Path) -> types.ModuleType:
    """Import one plugin file as its own module. Its `@tool_function`s are collected into a
    throwaway registry (so duplicates inside the file fail here, naming it) and stay attached
    to the functions for any registry to `include`."""
    module_name = f"chatfn_plugin_{file.stem}_{abs(hash(str(file.resolve()))):x}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise PluginLoadError(f"cannot import plugin {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        with Registry().collecting():
            spec.loader.exec_module(module)
    except FunctionDefinitionError as exc:
        sys.modules.pop(module_name, None)
        raise PluginLoadError(f"plugin {file}: {exc}") from exc
    except Exception as exc:  # any import-time failure of user code is reported, not hidden
        sys.modules.pop(module_name, None)
        raise PluginLoadError(
            f"plugin {file} failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def plugin_files(paths: list[str | Path], base_dir: Path | None = None) -> list[Path]:
    """The plugin files named by `plugins.paths`: each `*.py` (not starting with `_`) of a
    directory, or a single file; relative paths are taken from `base_dir`."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(sorted(p for p in path.glob("*.py") if not p.name.startswith("_")))
        else:
            raise PluginLoadError(f"plugin path {raw!r} does not exist ({path})")
    return files


#: The registry `@tool_function` writes to outside any `collecting()` block.
registry = Registry()
_active: contextvars.ContextVar[Registry] = contextvars.ContextVar(
    "chatfn_registry", default=registry
)


def _source_of(func: Callable[..., Any]) -> str:
    try:
        file = inspect.getsourcefile(func) or "?"
        line = inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        return getattr(func, "__module__", "?")
    return f"{file}:{line}"


def _args_model_of(
    func: Callable[..., Any], where: str, localns: dict[str, Any] | None = None
) -> type[BaseModel] | None:
    """Read the args model from the second parameter's annotation; enforce the signature."""
    label = f"function {func.__name__!r} ({where})"
    params = list(inspect.signature(func).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != len(positional) or not 1 <= len(positional) <= 2:
        raise FunctionDefinitionError(
            f"{label}: a handler takes (ctx: MessageContext, args: SomeArgsModel) or just (ctx); "
            f"got ({', '.join(p.name for p in params)})"
        )
    try:
        hints = typing.get_type_hints(func, localns=localns)
    except Exception as exc:
        if len(positional) == 1:
            return None  # `ctx: "MessageContext"` under TYPE_CHECKING: no args model there
        raise FunctionDefinitionError(f"{label}: cannot resolve annotations: {exc}") from exc
    if len(positional) == 1:
        only = hints.get(positional[0].name)
        if isinstance(only, type) and issubclass(only, BaseModel):
            # `def f(args: Model)`: ctx forgotten. Registered as argument-less, it would only
            # fail when called, with the context where the arguments should be.
            raise FunctionDefinitionError(
                f"{label}: the handler's only parameter is the args model "
                f"`{positional[0].name}: {only.__name__}`; write "
                f"(ctx: MessageContext, {positional[0].name}: {only.__name__})"
            )
        return None
    annotation = hints.get(positional[1].name)
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        raise FunctionDefinitionError(
            f"{label}: the second parameter must be annotated with a pydantic BaseModel subclass, "
            f"got {annotation!r}"
        )
    return annotation


_ARGS_HEADING = re.compile(r"^(?:Args|Arguments|Parameters):[ \t]*$", re.M)
_ARG_LINE = re.compile(r"^[ \t]+(\w+)[^:\n]*:")


def _without_args_section(doc: str, schema: dict[str, Any]) -> str:
    """A docstring's Google-style `Args:` section, when every name it lists is a field with a
    description of its own, is said twice on every request (the fields carry it): cut it.
    Kept when it says anything the fields do not (an unknown name, an undescribed field)."""
    heading = _ARGS_HEADING.search(doc)
    if heading is None:
        return doc
    lines = doc[heading.end() :].split("\n")[1:]
    end = next(
        (i for i, line in enumerate(lines) if line.strip() and not line[0].isspace()),
        len(lines),
    )
    indents = [len(x) - len(x.lstrip()) for x in lines[:end] if x.strip()]
    names = [
        m.group(1)
        for x in lines[:end]
        if (m := _ARG_LINE.match(x)) and len(x) - len(x.lstrip()) == min(indents)
    ]
    props = schema.get("properties") or {}
    if not names or not all(
        isinstance(props.get(n), dict) and props[n].get("description") for n in names
    ):
        return doc
    rest = "\n".join(lines[end:])
    return (
        doc[: heading.start()].rstrip() + ("\n\n" + rest.strip() if rest.strip() else "")
    ).strip()


def _said_in(part: Any, whole: str) -> bool:
    """Whether `part` (a text or not) is already said, word for word, in `whole`."""
    return isinstance(part, str) and " ".join(part.split()) in " ".join(whole.split())


def build_spec(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    examples: list[str] | tuple[str, ...] = (),
    scope: Scope = "both",
    require_at: bool = False,
    admin_only: bool = False,
    timeout: float | None = None,
    allow: Callable[[Caller], str | None] | None = None,
    for_model: Callable[[Caller], bool] | None = None,
    localns: dict[str, Any] | None = None,
    chat_admin: bool = False,
    pure: bool = False,
    approval: Approval | None = None,
    approval_timeout: float | None = None,
) -> FunctionSpec:
    where = _source_of(func)
    fname = func.__name__ if name is None else name
    if not NAME_PATTERN.match(fname):
        raise FunctionDefinitionError(
            f"function name {fname!r} ({where}) must match {NAME_PATTERN.pattern}: "
            "providers reject other names"
        )
    if scope not in ("group", "private", "both"):
        raise FunctionDefinitionError(
            f"function {fname!r} ({where}): scope must be "
            f"'group', 'private' or 'both', got {scope!r}"
        )
    if timeout is not None and timeout <= 0:
        raise FunctionDefinitionError(f"function {fname!r} ({where}): timeout must be > 0")
    if approval not in (None, "chat_admin", "admin"):
        raise FunctionDefinitionError(
            f"function {fname!r} ({where}): approval must be 'chat_admin' or 'admin', "
            f"got {approval!r}"
        )
    if approval_timeout is not None and approval_timeout <= 0:
        raise FunctionDefinitionError(f"function {fname!r} ({where}): approval_timeout must be > 0")
    desc = (description or inspect.getdoc(func) or "").strip()
    if not desc:
        raise FunctionDefinitionError(
            f"function {fname!r} ({where}) needs a description (argument or docstring): "
            "the model decides when to call it from that text"
        )
    args_model = _args_model_of(func, where, localns)
    if args_model is not None:
        schema = args_model.model_json_schema()
        if description is None:
            desc = _without_args_section(desc, schema)
        if _said_in(schema.get("description"), desc):
            schema.pop("description")  # the args model's docstring repeating the function's
    else:
        schema = {"type": "object", "properties": {}}
    schema.pop("title", None)
    return FunctionSpec(
        name=fname,
        description=desc,
        parameters_schema=schema,
        handler=func,
        args_model=args_model,
        examples=tuple(examples),
        scope=scope,
        require_at=require_at,
        admin_only=admin_only or chat_admin,
        chat_admin=chat_admin,
        timeout=timeout,
        is_async=inspect.iscoroutinefunction(func),
        source=where,
        allow=allow,
        for_model=for_model,
        pure=pure,
        approval=approval,
        approval_timeout=approval_timeout,
    )


def schema_validator(schema: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A validator for arguments described by a JSON schema (the draft named by `$schema`, else
    2020-12). Raises FunctionDefinitionError for a schema that is itself invalid, at
    registration, not at the first call."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise FunctionDefinitionError(f"invalid JSON schema: {exc.message}") from None
    checker = cls(schema)

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        errors = sorted(checker.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            parts = []
            for err in errors[:5]:
                loc = ".".join(str(p) for p in err.absolute_path) or "arguments"
                parts.append(f"{loc}: {err.message}")
            raise InvalidArguments("; ".join(parts))
        return arguments

    return validate


def schema_function(
    name: str,
    description: str,
    parameters_schema: dict[str, Any],
    handler: Callable[..., Any],
    *,
    scope: Scope = "both",
    require_at: bool = False,
    admin_only: bool = False,
    timeout: float | None = None,
    allow: Callable[[Caller], str | None] | None = None,
    source: str = "",
) -> FunctionSpec:
    """A function declared by a JSON schema rather than an args model (an MCP server's tool):
    `handler(ctx, arguments: dict)` gets the arguments once they match the schema. The same
    checks as `@tool_function` apply (name, scope, timeout, description); register it with
    `PluginHost.add_function`."""
    where = source or name
    if not NAME_PATTERN.match(name):
        raise FunctionDefinitionError(
            f"function name {name!r} ({where}) must match {NAME_PATTERN.pattern}"
        )
    if scope not in ("group", "private", "both"):
        raise FunctionDefinitionError(f"function {name!r} ({where}): bad scope {scope!r}")
    if timeout is not None and timeout <= 0:
        raise FunctionDefinitionError(f"function {name!r} ({where}): timeout must be > 0")
    if not description.strip():
        raise FunctionDefinitionError(f"function {name!r} ({where}) needs a description")
    schema = dict(parameters_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    try:
        validator = schema_validator(schema)
    except FunctionDefinitionError as exc:
        raise FunctionDefinitionError(f"function {name!r} ({where}): {exc}") from None
    return FunctionSpec(
        name=name,
        description=description.strip(),
        parameters_schema=schema,
        handler=handler,
        scope=scope,
        require_at=require_at,
        admin_only=admin_only,
        timeout=timeout,
        is_async=inspect.iscoroutinefunction(handler),
        source=where,
        allow=allow,
        validator=validator,
    )


def tool_function(
    name: str | None = None,
    description: str | None = None,
    *,
    examples: list[str] | tuple[str, ...] = (),
    scope: Scope = "both",
    require_at: bool = False,
    admin_only: bool = False,
    timeout: float | None = None,
    allow: Callable[[Caller], str | None] | None = None,
    for_model: Callable[[Caller], bool] | None = None,
    chat_admin: bool = False,
    pure: bool = False,
    approval: Approval | None = None,
    approval_timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `handler(ctx, args) -> FunctionResult` (def or async def) as a function the
    model can call and users can run as `/name ...`. The handler is returned unchanged.

    `admin_only`: only `bot.admins`. `chat_admin`: a per-chat admin command (it must act on
    the chat it is called from and no other): `bot.admins`, and with `bot.trust_group_admins`
    also a group's owner and admins as the platform reports them, in that group only.

    `allow(ctx) -> str | None` adds a permission rule of your own (None: allowed, else the
    reason); like `admin_only` it hides the function from the model and is enforced again when
    the call executes. `for_model(ctx) -> bool` says whether the model is offered it at all
    (None: yes); a command meant for people returns False and still runs as `/name`.
    `pure`: the function has no effects (it reads or computes), so `chatfn replay` may run it
    again on recorded turns; any other function only has its recorded result replayed.
    `approval` ("chat_admin" or "admin"): a risky function. A call from the model (or a slash
    command from someone who may not approve it) is held, the chat is asked, and it runs with
    its original arguments once an approver answers `/approve ID` (or the platform's button);
    denied, or unanswered after `approval_timeout` seconds (`bot.approval_timeout`), the model
    is told it was refused (function_calls/approvals.py)."""

    # With `from __future__ import annotations`, an args model defined inside a function (tests,
    # factories) is only a string; resolve it in the namespace where the decorator was applied.
    caller_locals = dict(sys._getframe(1).f_locals)

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        spec = build_spec(
            func,
            name=name,
            description=description,
            examples=examples,
            scope=scope,
            require_at=require_at,
            admin_only=admin_only,
            timeout=timeout,
            allow=allow,
            for_model=for_model,
            localns=caller_locals,
            chat_admin=chat_admin,
            pure=pure,
            approval=approval,
            approval_timeout=approval_timeout,
        )
        _active.get().add(spec)
        setattr(func, SPEC_ATTR, spec)
        return func

    return decorate
