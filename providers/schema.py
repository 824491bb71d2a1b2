"""Rewrite a Pydantic-generated JSON schema (`Model.model_json_schema()`) for each provider's API.

Pure functions, no I/O: one per provider, because each API accepts a different subset of JSON
Schema and rejects (or silently mishandles) the rest. `check_schema_for` runs the same conversion
and reports what would go wrong, so the health check can flag a function before a model refuses it.
The shared helpers and the compaction every rewrite ends with are in providers.schema_compaction;
the walk over a schema (refs, pydantic's spellings, children) is written once in
providers.schema_walk, and each provider says only what it does at one node (OpenAI strict mode
below, Gemini in providers.schema_gemini).
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
    compact_schema,
    drop_absent_nulls,
    nulls_meaning_absent,
    per_schema,
)
from providers.schema_gemini import GeminiWalker
from providers.schema_walk import SchemaWalker

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


class _StrictWalker(SchemaWalker):
    """OpenAI strict mode at one node: refuse (`_NotStrict`) what it cannot express without a
    change of meaning, drop annotations it does not allow, close every object."""

    provider = "openai"
    unwrap_all_of = False  # allOf is refused below, wrapped or not

    def node(self, node: JsonSchema, path: str, stack: tuple[str, ...]) -> Any:
        _refuse_unsupported(node, path)
        is_object = node.get("type") == "object" or "properties" in node
        if is_object:
            _refuse_open_object(node, path)
        for key in _OPENAI_STRICT_DROP:
            node.pop(key, None)
        if "$ref" in node and len(node) > 1:
            # Strict mode forbids siblings next to $ref (pydantic puts `description` there).
            node = {"anyOf": [{"$ref": node.pop("$ref")}], **node}
        out = self.children(node, path, stack)
        if is_object:
            out.setdefault("properties", {})
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out


def _openai_strict(node: Any, path: str) -> Any:
    return _StrictWalker({}).walk(node, path)


def _refuse_unsupported(node: JsonSchema, path: str) -> None:
    if _OPENAI_STRICT_UNSUPPORTED & node.keys():
        raise _NotStrict(path)
    if node.get("format") is not None and node["format"] not in _OPENAI_STRICT_FORMATS:
        raise _NotStrict(path)


def _refuse_open_object(node: JsonSchema, path: str) -> None:
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
    out: JsonSchema = GeminiWalker(_defs_of(schema), notes).walk(root, "$", stack)
    out.setdefault("properties", {})
    out["type"] = "object"
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
