"""The provider-independent part of tool schemas: what every rewrite shares, and compaction.

`compact_schema` drops what a Pydantic schema says that tells the model nothing; the rule for
fields whose null means "not given" (`nulls_meaning_absent`) is here too, because the schemas
sent (providers.schema) and the executor's argument check (function_calls.executor) must use
the same one. Pure functions, no I/O.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any, TypeVar

JsonSchema = dict[str, Any]
R = TypeVar("R")

__all__ = [
    "JsonSchema",
    "SchemaError",
    "compact_schema",
    "drop_absent_nulls",
    "nulls_meaning_absent",
    "per_schema",
]


class SchemaError(ValueError):
    """A schema the provider would reject and that cannot be rewritten without losing meaning."""

    def __init__(self, message: str, *, provider: str = "", path: str = "") -> None:
        where = f" at {path}" if path else ""
        super().__init__(f"{provider + ': ' if provider else ''}{message}{where}")
        self.provider = provider
        self.path = path


# --------------------------------------------------------------------------- shared helpers


def per_schema(func: Callable[[JsonSchema], R]) -> Callable[[JsonSchema], R]:
    """Remember a rewrite per schema object: adapters rewrite the same function schemas on
    every request (FunctionSpec holds one dict for its lifetime), and a tool loop's CPU should
    not grow with the number of tools. Keyed by identity; the entry holds the schema, so its id
    cannot be reused while cached. Results are shared: callers must not mutate them."""
    cache: dict[int, tuple[JsonSchema, R]] = {}

    @functools.wraps(func)
    def wrapper(schema: JsonSchema) -> R:
        hit = cache.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        result = func(schema)
        if len(cache) >= 4096:  # schemas built on the fly (tests, check_system): stay bounded
            cache.clear()
        cache[id(schema)] = (schema, result)
        return result

    return wrapper


def _resolve_ref(ref: str, defs: dict[str, JsonSchema], provider: str, path: str) -> JsonSchema:
    """Pydantic only emits local references (`#/$defs/Name`); anything else we cannot inline."""
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            name = ref[len(prefix) :]
            if name in defs:
                return defs[name]
    raise SchemaError(f"unresolvable $ref {ref!r}", provider=provider, path=path)


def _defs_of(schema: JsonSchema) -> dict[str, JsonSchema]:
    return {**schema.get("definitions", {}), **schema.get("$defs", {})}


def _ensure_object_root(schema: JsonSchema, provider: str) -> JsonSchema:
    """Every function-calling API wants an object at the root (the arguments are keyword args)."""
    if not isinstance(schema, dict):
        raise SchemaError("schema must be a JSON object", provider=provider)
    root = copy.deepcopy(schema)
    if "$ref" in root and len(root) <= 2:  # a root that only points at its own definition
        root = {
            **copy.deepcopy(_resolve_ref(root["$ref"], _defs_of(schema), provider, "$")),
            **{k: v for k, v in root.items() if k not in ("$ref",)},
        }
    kind = root.get("type")
    if kind is None and "properties" in root:
        root["type"] = kind = "object"
    if kind != "object":
        raise SchemaError(f"the root must be an object, got type {kind!r}", provider=provider)
    root.setdefault("properties", {})
    return root


def _is_null(s: Any) -> bool:
    return isinstance(s, dict) and s.get("type") == "null" and len(s) == 1


# --------------------------------------------------------------------------- compaction

# Keys whose value is one subschema, or a list of them; `properties`/`$defs` map names to them.
_SUBSCHEMA = frozenset({"items", "anyOf", "oneOf", "allOf", "not", "prefixItems", "if", "then"})
_SUBSCHEMA |= {"else", "additionalProperties", "contains", "propertyNames"}
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
# A branch merged into `"type": [X, "null"]` must only hold keywords that apply to X's type
# alone; these apply to every value (null included) and would change what validates.
_NOT_MERGEABLE = frozenset({"enum", "const", "$ref", "anyOf", "oneOf", "allOf", "not", "if"})


def compact_schema(schema: JsonSchema) -> JsonSchema:
    """The same schema without what tells the model nothing; the input is not changed.

    Every tool definition is resent with every request, so its bytes are paid for on every
    turn. Dropped: Pydantic's `title`s (the property name already says it), defaults that only
    say "nothing given" (`null`, `""`, `[]`, `{}`), `"type"` next to an `enum`/`const` whose
    values all have that type (the values say it), and `anyOf [X, {"type": "null"}]` becomes
    `{..X, "type": [X.type, "null"]}` when X is a plain typed schema: type-specific keywords
    (`maxLength`, `minimum`, `items`) ignore null, so both forms accept exactly the same values.
    A top-level field whose default is None is sent in its optional form (not required, null
    left out: `{"type": "string"}`), see `nulls_meaning_absent`: the executor drops such a
    null before validating, so omitting the field and sending null mean the same.
    Every constraint (enum, bounds, required, formats, patterns) is kept. Not for OpenAI
    strict mode, which needs every field required and nullable (`openai_parameters`).
    """
    compact: JsonSchema = _compact(_optional_form(schema), loose=True)
    return compact


@per_schema
def nulls_meaning_absent(schema: JsonSchema) -> frozenset[str]:
    """Top-level fields whose explicit null means the same as leaving them out: optional (not
    `required`), admitting null, with `"default": null`, so the function gets None either way.

    The schemas sent to non-strict providers show these fields without null (their optional
    form, shorter); the executor removes a null the model sends for one of them before
    validation, so a call valid against the full schema stays valid. One rule for both sides.
    """
    try:
        root = _ensure_object_root(schema, "")
    except SchemaError:
        return frozenset()
    required = set(root.get("required") or ())
    props = root.get("properties")
    if not isinstance(props, dict):
        return frozenset()
    return frozenset(
        name
        for name, prop in props.items()
        if name not in required
        and isinstance(prop, dict)
        and prop.get("default", ...) is None
        and _says_null(prop)  # `x: str = None` refuses null: leave it as it is
    )


def _says_null(prop: JsonSchema) -> bool:
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in (prop.get("enum") or ()):
        return True
    return any(_is_null(b) for b in (prop.get("anyOf") or []) + (prop.get("oneOf") or []))


def drop_absent_nulls(schema: JsonSchema, arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` without the nulls `nulls_meaning_absent` says mean "not given" (the same
    dict when there are none, so the common call costs one scan)."""
    names = nulls_meaning_absent(schema)
    if not names or not any(arguments.get(n, ...) is None for n in names):
        return arguments
    return {k: v for k, v in arguments.items() if not (v is None and k in names)}


def _optional_form(schema: JsonSchema) -> JsonSchema:
    """`schema` with null taken out of each field of `nulls_meaning_absent` (and its
    `default: null`); a shallow rewrite of the root, the input is not changed."""
    names = nulls_meaning_absent(schema)
    if not names:
        return schema
    root = _ensure_object_root(schema, "")
    props = dict(root["properties"])
    for name in names:
        prop = {k: v for k, v in props[name].items() if k != "default"}
        kind = prop.get("type")
        if isinstance(kind, list) and "null" in kind:
            kinds = [k for k in kind if k != "null"]
            if kinds:
                prop["type"] = kinds[0] if len(kinds) == 1 else kinds
        branches = prop.get("anyOf")
        if isinstance(branches, list):
            rest = [b for b in branches if not _is_null(b)]
            if rest and len(rest) < len(branches):
                prop["anyOf"] = rest
        props[name] = prop
    return {**root, "properties": props}


def _compact(node: Any, *, loose: bool) -> Any:
    if isinstance(node, list):
        return [_compact(item, loose=loose) for item in node]
    if not isinstance(node, dict):
        return node
    out: JsonSchema = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "default" and (value is None or (loose and value in ("", [], {}))):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _compact(sub, loose=loose) for name, sub in value.items()}
        elif key in _SUBSCHEMA:
            out[key] = _compact(value, loose=loose)
        else:  # enum, const, required, default, examples: data, not subschemas
            out[key] = value
    if loose:
        _drop_implied_type(out)
        out = _merge_single_branch(out)
    return _merge_nullable(out)


# What a JSON value is, per JSON Schema type name (bool is not an integer there).
_IS_TYPE: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
}


def _drop_implied_type(node: JsonSchema) -> None:
    """`{"enum": ["a", "b"], "type": "string"}` accepts what `{"enum": ["a", "b"]}` accepts."""
    kind = node.get("type")
    check = _IS_TYPE.get(kind) if isinstance(kind, str) else None
    if check is None:
        return
    values = node["enum"] if isinstance(node.get("enum"), list) else None
    if values is None and "const" in node:
        values = [node["const"]]
    if values and all(check(v) for v in values):
        del node["type"]


def _merge_single_branch(node: JsonSchema) -> JsonSchema:
    """`{"anyOf": [X], ...}` is X with the siblings, when no keyword appears in both."""
    branches = node.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 1 or not isinstance(branches[0], dict):
        return node
    siblings = {k: v for k, v in node.items() if k != "anyOf"}
    if siblings.keys() & branches[0].keys():
        return node
    return {**siblings, **branches[0]}


def _merge_nullable(node: JsonSchema) -> JsonSchema:
    branches = node.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2:
        return node
    rest = [b for b in branches if not _is_null(b)]
    if len(rest) != 1 or not isinstance(rest[0], dict):
        return node
    branch = rest[0]
    kind = branch.get("type")
    siblings = {k: v for k, v in node.items() if k != "anyOf"}
    if not isinstance(kind, str) or _NOT_MERGEABLE & branch.keys() or siblings.keys() & branch:
        return node
    return {**siblings, **branch, "type": [kind, "null"]}
