"""One walker over a JSON schema, shared by every provider's rewrite.

What every rewrite has to get right is the same: follow `$ref` into `$defs` (and refuse a
recursion that cannot be inlined), read pydantic's spellings (`oneOf` for a discriminated
union, a one-item `allOf` around a described `$ref` before pydantic 2.9), and recurse into
`properties`, `items` and `anyOf` with a path for error messages. What differs is what each
provider accepts at one node. So the walk is written once here and a provider only says what
it does to a node (`SchemaWalker.node`), as pydantic-ai's `JsonSchemaTransformer.walk` and its
per-profile `transform` do.
"""

from __future__ import annotations

from typing import Any

from providers.schema_compaction import JsonSchema, SchemaError, _resolve_ref

__all__ = ["SchemaWalker"]


class SchemaWalker:
    """Walks a schema node by node; subclasses rewrite one node in `node`.

    `inline_refs`: replace each `$ref` by its definition (for APIs without `$ref`, such as
    Gemini's), refusing a recursive model; otherwise `$ref` is left to the subclass.
    """

    provider = ""
    inline_refs = False
    unwrap_all_of = True

    def __init__(self, defs: dict[str, JsonSchema]) -> None:
        self.defs = defs

    def walk(self, node: Any, path: str, stack: tuple[str, ...] = ()) -> Any:
        """The rewritten `node`; `stack` holds the `$ref`s being inlined above it."""
        if not isinstance(node, dict):
            return self.leaf(node, path)
        node, stack = self.normalise(dict(node), path, stack)
        return self.node(node, path, stack)

    def normalise(
        self, node: JsonSchema, path: str, stack: tuple[str, ...]
    ) -> tuple[JsonSchema, tuple[str, ...]]:
        """pydantic's spellings in one form: `$ref` inlined (when asked), a one-item `allOf`
        unwrapped, `oneOf` as `anyOf` (for validated models the two coincide)."""
        while True:
            if self.inline_refs and "$ref" in node:
                node, stack = self._inline(node, path, stack)
                continue
            wrapped = node.get("allOf") if self.unwrap_all_of else None
            if isinstance(wrapped, list) and len(wrapped) == 1 and isinstance(wrapped[0], dict):
                node.pop("allOf")
                node = {**wrapped[0], **node}  # the wrapper's description wins
                continue
            break
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")
        return node, stack

    def _inline(
        self, node: JsonSchema, path: str, stack: tuple[str, ...]
    ) -> tuple[JsonSchema, tuple[str, ...]]:
        ref = node.pop("$ref")
        if ref in stack:
            name = ref.rsplit("/", 1)[-1]
            raise SchemaError(
                f"recursive model {name!r} cannot be inlined ({self.provider} has no $ref)",
                provider=self.provider,
                path=path,
            )
        target = dict(_resolve_ref(ref, self.defs, self.provider, path))
        # Siblings of $ref (a field's description) win over the definition's own.
        return {**target, **node}, (*stack, ref)

    def node(self, node: JsonSchema, path: str, stack: tuple[str, ...]) -> Any:
        """One node's rewrite; the default keeps it and walks its children."""
        return self.children(node, path, stack)

    def leaf(self, value: Any, path: str) -> Any:
        """A value where a schema was expected (a list of schemas, `True`)."""
        if isinstance(value, list):
            return [self.walk(item, path) for item in value]
        return value

    def children(
        self,
        node: JsonSchema,
        path: str,
        stack: tuple[str, ...],
        keep: frozenset[str] | None = None,
    ) -> JsonSchema:
        """`node` with its sub-schemas walked (and only the `keep` keys, when given)."""
        out: JsonSchema = {}
        for key, value in node.items():
            if keep is not None and key not in keep:
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {
                    name: self.walk(sub, f"{path}.{name}", stack) for name, sub in value.items()
                }
            elif key == "items":
                out[key] = self.walk(value, f"{path}[]", stack)
            elif key == "anyOf" and isinstance(value, list):
                out[key] = [self.walk(b, f"{path}|{i}", stack) for i, b in enumerate(value)]
            else:
                out[key] = value
        return out
