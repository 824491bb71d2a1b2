"""Gemini's rules for one schema node, on the shared walker (providers.schema_walk).

Gemini's `Schema` is an OpenAPI 3.0 subset, and the google-genai SDK validates the dict with
extra="forbid", so any other key fails before the request is even sent
(https://ai.google.dev/api/caching#Schema). Each rule below is one thing that subset lacks and
what is sent instead; lossy rewrites are noted for the health check.
"""

from __future__ import annotations

from typing import Any

from providers.schema_compaction import JsonSchema, SchemaError, _is_null
from providers.schema_walk import SchemaWalker

__all__ = ["GeminiWalker"]

# What Gemini's `Schema` accepts.
GEMINI_KEYS = frozenset(
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
GEMINI_FORMATS = {
    "string": {"enum", "date-time"},
    "integer": {"int32", "int64"},
    "number": {"float", "double"},
}
_JSON_TYPE = {"int": "integer", "float": "number", "bool": "boolean"}


class GeminiWalker(SchemaWalker):
    """No `$ref` (definitions inlined, recursion refused), `anyOf [X, null]` as X with
    `nullable`, `const` as a one-value enum, string enums only, a few formats, arrays that say
    what their items are, and only the keys in GEMINI_KEYS."""

    provider = "gemini"
    inline_refs = True

    def __init__(self, defs: dict[str, JsonSchema], notes: list[str]) -> None:
        super().__init__(defs)
        self.notes = notes  # lossy rewrites, for check_schema_for

    def node(self, node: JsonSchema, path: str, stack: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            raise SchemaError("schema node must be an object", provider="gemini", path=path)
        nullable = _split_type_list(node)
        if "anyOf" in node:
            branches = node.pop("anyOf")
            rest = [b for b in branches if not _is_null(b)]
            nullable = nullable or len(rest) < len(branches)
            if not rest:
                raise SchemaError("a field that can only be null", provider="gemini", path=path)
            if len(rest) == 1:  # X | None: X itself, marked nullable
                merged = {**rest[0], **{k: v for k, v in node.items() if k != "type"}}
                out = self.walk(merged, path, stack)
                return {**out, "nullable": True} if nullable else out
            node["anyOf"] = rest
        hints: list[str] = []
        _enums(node, hints)
        _bounds(node, hints)
        _format(node, hints)
        self._array(node, path)
        self._object(node, path, hints)
        description = node.get("description")
        if description or hints:
            node["description"] = " ".join([description or ""] + [f"({h})" for h in hints]).strip()
        out = self.children(node, path, stack, keep=GEMINI_KEYS)
        if "required" in out:
            props = node.get("properties") or {}
            out["required"] = [r for r in out["required"] if r in props]
        if out.get("type") == "object" and not out.get("properties"):
            out.pop("properties", None)
            out.pop("required", None)
        if nullable:
            out["nullable"] = True
        return out

    def leaf(self, value: Any, path: str) -> Any:
        raise SchemaError("schema node must be an object", provider="gemini", path=path)

    def _array(self, node: JsonSchema, path: str) -> None:
        if "prefixItems" in node:  # tuples: Gemini has no positional items
            prefix = node.pop("prefixItems")
            unique = [p for i, p in enumerate(prefix) if p not in prefix[:i]]
            node.setdefault("items", unique[0] if len(unique) == 1 else {"anyOf": unique})
            node.setdefault("minItems", len(prefix))
            node.setdefault("maxItems", len(prefix))
        if node.get("type") == "array" and not node.get("items"):
            # Gemini rejects an ARRAY without `items`; `list[Any]` gets strings, the only
            # element type every model can produce and Pydantic can coerce from.
            node["items"] = {"type": "string"}
            self.notes.append(f"{path}: list of unspecified items sent as a list of strings")

    def _object(self, node: JsonSchema, path: str, hints: list[str]) -> None:
        if node.get("type") != "object" and "properties" not in node:
            return
        node["type"] = "object"
        if not node.get("properties") and path != "$":
            # Gemini cannot describe an open map (dict[str, X]) nor an object without
            # properties; it is sent as an object the model will usually leave empty.
            self.notes.append(
                f"{path}: free-form object (dict) cannot be described to "
                "Gemini; the model can only send {}"
            )
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                hints.append("an object mapping names to values")


def _split_type_list(node: JsonSchema) -> bool:
    """`{"type": ["string", "null"]}` as one type (or an anyOf); True when null was in it."""
    kind = node.get("type")
    if not isinstance(kind, list):
        return False
    kinds = [k for k in kind if k != "null"]
    if len(kinds) == 1:
        node["type"] = kinds[0]
    else:
        node.pop("type")
        node["anyOf"] = [{"type": k} for k in kinds]
    return "null" in kind


def _enums(node: JsonSchema, hints: list[str]) -> None:
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "enum" not in node:
        return
    values = node["enum"]
    if all(isinstance(v, str) for v in values):
        node["type"] = "string"
        return
    # Gemini only accepts string enums; sending str(1) would make the model answer "1" where
    # the Pydantic model wants 1, so keep the type and describe the values.
    node.pop("enum")
    hints.append("one of: " + ", ".join(repr(v) for v in values))
    if "type" not in node:
        kinds = {type(v).__name__ for v in values}
        node["type"] = _JSON_TYPE.get(kinds.pop(), "string") if len(kinds) == 1 else "string"


def _bounds(node: JsonSchema, hints: list[str]) -> None:
    for bound, word in (("exclusiveMinimum", ">"), ("exclusiveMaximum", "<")):
        if bound in node:  # Gemini has no exclusive bounds; pydantic still enforces them
            hints.append(f"must be {word} {node.pop(bound)}")
    if "multipleOf" in node:
        hints.append(f"a multiple of {node.pop('multipleOf')}")


def _format(node: JsonSchema, hints: list[str]) -> None:
    fmt = node.get("format")
    if fmt is not None and fmt not in GEMINI_FORMATS.get(node.get("type", ""), set()):
        node.pop("format")
        hints.append(f"format: {fmt}")
