"""Rewrite a Pydantic-generated JSON schema (`Model.model_json_schema()`) for each provider's API.

Pure functions, no I/O: one per provider, because each API accepts a different subset of JSON
Schema and rejects (or silently mishandles) the rest. `check_schema_for` runs the same conversion
and reports what would go wrong, so the health check can flag a function before a model refuses it.
The shared helpers and the compaction every rewrite ends with are in providers.schema_compaction.
"""

from __future__ import annotations

import copy
from typing import Any

from providers.schema_compaction import (
    JsonSchema,
    SchemaError,
    _compact,
    _defs_of,
    _ensure_object_root,
    _is_null,
    _optional_form,
    _resolve_ref,
    compact_schema,
    drop_absent_nulls,
    nulls_meaning_absent,
    per_schema,
)

__all__ = [
    "SchemaError",
    "anthropic_input_schema",
    "check_schema_for",
    "compact_schema",
    "drop_absent_nulls",
    "gemini_parameters",
    "nulls_meaning_absent",
    "openai_parameters",
    "openai_plain_parameters",
]


# --------------------------------------------------------------------------- OpenAI

# Keywords OpenAI strict mode refuses ("Supported schemas" in
# https://platform.openai.com/docs/guides/structured-outputs): a schema using them is sent
# non-strict rather than silently weakened.
_OPENAI_STRICT_UNSUPPORTED = frozenset(
    {
        "minLength",
        "maxLength",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "prefixItems",
        "not",
        "if",
        "then",
        "else",
        "allOf",
        "dependentRequired",
        "dependentSchemas",
    }
)
# String formats strict mode accepts; any other format makes the schema non-strict.
_OPENAI_STRICT_FORMATS = frozenset(
    {
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "uuid",
    }
)
# Annotations strict mode does not allow and that carry no validation meaning for the model.
_OPENAI_STRICT_DROP = ("title", "default", "examples", "discriminator", "$schema")


@per_schema
def openai_parameters(schema: JsonSchema) -> tuple[JsonSchema, bool]:
    """Return `(parameters, strict)` for a Chat Completions function tool.

    Strict mode needs every property required and `additionalProperties: false` on every
    object. A field with a default can only be made required without changing its meaning when
    the default is None and the type already admits null (the model sends null, the Pydantic
    model fills None either way); any other optional field, a free-form dict, or an unsupported
    keyword means strict is off and the plain schema (title dropped) is returned.
    """
    plain = _ensure_object_root(schema, "openai")
    try:
        strict_schema = _openai_strict(copy.deepcopy(plain), "$")
        for name, sub in strict_schema.get("$defs", {}).items():
            strict_schema["$defs"][name] = _openai_strict(sub, f"$defs.{name}")
    except _NotStrict:
        return compact_schema(plain), False
    # Strict mode documents `"type": ["string", "null"]` as its optional form, so compaction's
    # nullable merge is within what it accepts; nothing else of the loose compaction applies.
    return _compact(strict_schema, loose=False), True


@per_schema
def openai_plain_parameters(schema: JsonSchema) -> JsonSchema:
    """`parameters` for a compatible server without strict mode: the compacted schema (vLLM,
    Ollama and older gateways take plain JSON Schema, type lists included)."""
    return compact_schema(_ensure_object_root(schema, "openai"))


class _NotStrict(Exception):
    """Internal: the schema cannot be made strict without changing its meaning."""


def _openai_strict(node: Any, path: str) -> Any:
    if isinstance(node, list):
        return [_openai_strict(item, path) for item in node]
    if not isinstance(node, dict):
        return node
    if _OPENAI_STRICT_UNSUPPORTED & node.keys():
        raise _NotStrict(path)
    if node.get("format") is not None and node["format"] not in _OPENAI_STRICT_FORMATS:
        raise _NotStrict(path)
    is_object = node.get("type") == "object" or "properties" in node
    if is_object:
        if node.get("additionalProperties") not in (False, None):
            raise _NotStrict(path)  # a dict[str, X]: strict mode has no open maps
        if "properties" not in node and path != "$":
            raise _NotStrict(path)  # a bare `dict`: open, cannot be closed
        required = set(node.get("required", []))
        for name, prop in node.get("properties", {}).items():
            if name in required:
                continue
            default = prop.get("default", ...) if isinstance(prop, dict) else ...
            if not (default is None and _admits_null(prop)):
                raise _NotStrict(f"{path}.{name}")  # optional with a real default
    node = dict(node)
    for key in _OPENAI_STRICT_DROP:
        node.pop(key, None)
    if "oneOf" in node:  # strict mode only knows anyOf; for our validated models they coincide
        node["anyOf"] = node.pop("oneOf")
    if "$ref" in node and len(node) > 1:
        # Strict mode forbids siblings next to $ref (pydantic puts `description` there).
        node = {"anyOf": [{"$ref": node.pop("$ref")}], **node}
    out: JsonSchema = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: _openai_strict(v, f"{path}.{k}") for k, v in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = _openai_strict(value, path)
        else:
            out[key] = value
    if is_object:
        out.setdefault("properties", {})
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


def _admits_null(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return False
    if prop.get("type") == "null" or (
        isinstance(prop.get("type"), list) and "null" in prop["type"]
    ):
        return True
    return any(_is_null(b) for b in prop.get("anyOf", []) + prop.get("oneOf", []))


# --------------------------------------------------------------------------- Anthropic


@per_schema
def anthropic_input_schema(schema: JsonSchema) -> JsonSchema:
    """Return the `input_schema` of an Anthropic tool.

    The Messages API accepts JSON Schema (draft 2020-12) including `$defs`/`$ref`, so the
    Pydantic schema goes through nearly unchanged; it only insists on an object at the root
    (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use).
    """
    root = _ensure_object_root(schema, "anthropic")
    root.pop("$schema", None)
    # An argument-less tool keeps `"properties": {}`: the recorded requests of the real client
    # (tests/fixtures/providers/anthropic) send it, and nothing proves the API takes less.
    return compact_schema(root)


# --------------------------------------------------------------------------- Gemini

# What Gemini's `Schema` (an OpenAPI 3.0 subset) accepts; the google-genai SDK validates the
# dict with extra="forbid", so any other key fails before the request is even sent.
# https://ai.google.dev/api/caching#Schema
_GEMINI_KEYS = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "anyOf",
        "items",
        "minimum",
        "maximum",
        "propertyOrdering",
    }
)
# Gemini only knows these formats per type; any other is moved into the description.
_GEMINI_FORMATS = {
    "string": {"enum", "date-time"},
    "integer": {"int32", "int64"},
    "number": {"float", "double"},
}


@per_schema
def gemini_parameters(schema: JsonSchema) -> JsonSchema:
    """Return the `parameters` of a Gemini function declaration.

    Gemini's schema is an OpenAPI 3.0 subset: no `$ref` (definitions are inlined, recursion is
    refused because it cannot be inlined), no `title`/`default`/`examples`/`additionalProperties`
    (dropped), `anyOf [X, null]` becomes X with `nullable: true` (plain X for a top-level field
    whose default is None: see `nulls_meaning_absent`), `const` a one-value `enum`,
    enums only of strings (others become a description hint), only a few `format`s, and an array
    must say what its items are. Raises SchemaError when it cannot be expressed.
    """
    return _gemini(schema, [])


def _gemini(schema: JsonSchema, notes: list[str]) -> JsonSchema:
    root = _ensure_object_root(_optional_form(schema), "gemini")
    stack = (schema["$ref"],) if isinstance(schema.get("$ref"), str) else ()
    out = _GeminiRewriter(_defs_of(schema), notes).convert(root, "$", stack)
    out.setdefault("properties", {})
    out["type"] = "object"
    return out


class _GeminiRewriter:
    def __init__(self, defs: dict[str, JsonSchema], notes: list[str]) -> None:
        self.defs = defs
        self.notes = notes  # lossy rewrites, for check_schema_for

    def convert(self, node: Any, path: str, stack: tuple[str, ...]) -> JsonSchema:
        if not isinstance(node, dict):
            raise SchemaError("schema node must be an object", provider="gemini", path=path)
        node = dict(node)
        if "$ref" in node:
            ref = node.pop("$ref")
            if ref in stack:
                raise SchemaError(
                    f"recursive model {ref.rsplit('/', 1)[-1]!r} cannot be "
                    "inlined (Gemini has no $ref)",
                    provider="gemini",
                    path=path,
                )
            target = dict(_resolve_ref(ref, self.defs, "gemini", path))
            # Siblings of $ref (a field's description) win over the definition's own.
            node = {**target, **node}
            stack = (*stack, ref)
        for key in ("allOf",):  # pydantic < 2.9 wraps a described $ref in a one-item allOf
            if key in node and len(node[key]) == 1:
                node = {**node.pop(key)[0], **node}
                return self.convert(node, path, stack)
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")

        description = node.get("description")
        hints: list[str] = []
        nullable = False

        kind = node.get("type")
        if isinstance(kind, list):  # {"type": ["string", "null"]}
            nullable = "null" in kind
            kinds = [k for k in kind if k != "null"]
            if len(kinds) == 1:
                node["type"] = kinds[0]
            else:
                node.pop("type")
                node["anyOf"] = [{"type": k} for k in kinds]

        if "anyOf" in node:
            branches = node.pop("anyOf")
            rest = [b for b in branches if not _is_null(b)]
            nullable = nullable or len(rest) < len(branches)
            if len(rest) == 1:
                merged = {**rest[0], **{k: v for k, v in node.items() if k != "type"}}
                out = self.convert(merged, path, stack)
                if nullable:
                    out["nullable"] = True
                return out
            if not rest:
                raise SchemaError("a field that can only be null", provider="gemini", path=path)
            node["anyOf"] = [self.convert(b, f"{path}|{i}", stack) for i, b in enumerate(rest)]

        if "const" in node:
            node["enum"] = [node.pop("const")]
        if "enum" in node:
            values = node["enum"]
            if all(isinstance(v, str) for v in values):
                node["type"] = "string"
            else:
                # Gemini only accepts string enums; sending str(1) would make the model answer
                # "1" where the Pydantic model wants 1, so keep the type and describe the values.
                node.pop("enum")
                hints.append("one of: " + ", ".join(repr(v) for v in values))
                if "type" not in node:
                    kinds = {type(v).__name__ for v in values}
                    node["type"] = (
                        {"int": "integer", "float": "number", "bool": "boolean"}.get(
                            kinds.pop(), "string"
                        )
                        if len(kinds) == 1
                        else "string"
                    )

        for bound, word in (("exclusiveMinimum", ">"), ("exclusiveMaximum", "<")):
            if bound in node:  # Gemini has no exclusive bounds; pydantic still enforces it
                hints.append(f"must be {word} {node.pop(bound)}")
        if "multipleOf" in node:
            hints.append(f"a multiple of {node.pop('multipleOf')}")

        fmt = node.get("format")
        if fmt is not None and fmt not in _GEMINI_FORMATS.get(node.get("type", ""), set()):
            node.pop("format")
            hints.append(f"format: {fmt}")

        kind = node.get("type")
        if "prefixItems" in node:  # tuples: Gemini has no positional items
            prefix = node.pop("prefixItems")
            unique = [p for i, p in enumerate(prefix) if p not in prefix[:i]]
            node.setdefault("items", unique[0] if len(unique) == 1 else {"anyOf": unique})
            node.setdefault("minItems", len(prefix))
            node.setdefault("maxItems", len(prefix))
        if kind == "array" and not node.get("items"):
            # Gemini rejects an ARRAY without `items`; `list[Any]` gets strings, the only
            # element type every model can produce and Pydantic can coerce from.
            node["items"] = {"type": "string"}
            self.notes.append(f"{path}: list of unspecified items sent as a list of strings")
        if kind == "object" or "properties" in node:
            node["type"] = "object"
            extra = node.get("additionalProperties")
            props = node.get("properties") or {}
            if not props and path != "$":
                # Gemini cannot describe an open map (dict[str, X]) nor an object without
                # properties; it is sent as an object the model will usually leave empty.
                self.notes.append(
                    f"{path}: free-form object (dict) cannot be described to "
                    "Gemini; the model can only send {}"
                )
                if isinstance(extra, dict) and extra:
                    hints.append("an object mapping names to values")
        if description or hints:
            node["description"] = " ".join([description or ""] + [f"({h})" for h in hints]).strip()

        out: JsonSchema = {}
        for key, value in node.items():
            if key not in _GEMINI_KEYS:
                continue
            if key == "properties":
                out[key] = {
                    name: self.convert(sub, f"{path}.{name}", stack) for name, sub in value.items()
                }
            elif key == "items":
                out[key] = self.convert(value, f"{path}[]", stack)
            elif key == "required":
                props = node.get("properties") or {}
                out[key] = [r for r in value if r in props]
            else:
                out[key] = value
        if out.get("type") == "object" and not out.get("properties"):
            out.pop("properties", None)
            out.pop("required", None)
        if nullable:
            out["nullable"] = True
        return out


# --------------------------------------------------------------------------- health check


def schema_issues(provider: str, schema: JsonSchema) -> tuple[list[str], list[str]]:
    """(errors, warnings) a provider would have with a function's schema.

    Errors: the provider would reject the schema. Warnings: it is accepted but the rewrite loses
    something (Gemini: a dict field the model can only fill with `{}`). Called by the health
    check for every registered function and configured provider, so a refusal shows up at
    start-up, not in the middle of a conversation.
    """
    errors: list[str] = []
    warnings: list[str] = []
    try:
        if provider == "gemini":
            _gemini(schema, warnings)
        elif provider == "anthropic":
            anthropic_input_schema(schema)
        elif provider in ("openai", "scripted"):
            openai_parameters(schema)
        else:
            errors.append(f"unknown provider {provider!r}")
    except SchemaError as exc:
        errors.append(str(exc))
    return errors, warnings


def check_schema_for(provider: str, schema: JsonSchema) -> list[str]:
    """Every problem, errors and lossy rewrites alike; empty when it converts cleanly."""
    errors, warnings = schema_issues(provider, schema)
    return errors + warnings
