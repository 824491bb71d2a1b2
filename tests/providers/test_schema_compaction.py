"""Compacted tool schemas accept the arguments the Pydantic schemas accept.

Compaction drops titles, defaults that only say "nothing given", `type` next to an enum, folds
`anyOf [X, null]` into a type list, and shows a top-level field whose default is None in its
optional form (null left out). The property below checks, with a JSON Schema validator, that
every argument object keeps its verdict once the executor has dropped the nulls that mean
"not given" (`drop_absent_nulls`, which it applies before validating), that a compacted schema
never accepts what the full one refuses, and that the dropping changes nothing the function
receives. Gemini's OpenAPI subset is read back as JSON Schema and held to the same property.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from function_calls.builtins.reminders.functions import ReminderDeleteArgs, ReminderSetArgs
from function_calls.builtins.summary.functions import SummaryArgs
from function_calls.builtins.web_search.functions import WebSearchArgs
from providers.schema import (
    anthropic_input_schema,
    check_schema_for,
    compact_schema,
    drop_absent_nulls,
    gemini_parameters,
    openai_parameters,
    openai_plain_parameters,
)
from tests.providers.test_schema import Address, Everything, Place, Strict


class Odd(BaseModel):
    """A None default on a type that refuses null, next to one that admits it."""

    s: str = None  # type: ignore[assignment]
    n: int | None = None
    k: Literal["a", "b"] | None = None


MODELS: list[type[BaseModel]] = [
    Odd,
    ReminderSetArgs,
    ReminderDeleteArgs,
    SummaryArgs,
    WebSearchArgs,
    Everything,
    Strict,
    Address,
    Place,
]

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 12)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=8)
    | st.sampled_from(["", "12345", "2026-01-01T09:00:00", "2026-01-01", "a", "p", "red"])
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)


def _enum_values(schema: Any) -> list[Any]:
    if isinstance(schema, dict):
        found = list(schema.get("enum", []))
        for value in schema.values():
            found += _enum_values(value)
        return found
    if isinstance(schema, list):
        return [v for item in schema for v in _enum_values(item)]
    return []


def _arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Argument objects over the schema's own property names, with values of every JSON type
    and the schema's enum values, so both verdicts (valid, invalid) come up often."""
    value = _json | st.sampled_from(_enum_values(schema) or [None])
    # A nested object (home: Address) is only valid with the right keys: offer them too.
    nested = st.fixed_dictionaries(
        {}, optional={"street": st.text(max_size=4), "zip": value, "city": value, "when": value}
    )
    props = dict.fromkeys(schema.get("properties", {}), value | nested | st.lists(nested))
    # Required fields present as short strings: the common shape of a valid call.
    required = schema.get("required", [])
    plausible = st.fixed_dictionaries(
        dict.fromkeys(required, st.text(min_size=1, max_size=5)),
        optional={k: v for k, v in props.items() if k not in required},
    )
    return (
        st.fixed_dictionaries({}, optional=props)
        | plausible
        | st.dictionaries(st.text(max_size=4), value)
    )


def _verdict(schema: dict[str, Any], instance: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(instance)


def _from_gemini(node: Any) -> Any:
    """A Gemini schema as the JSON Schema it stands for (`nullable` is a null in the type)."""
    if isinstance(node, list):
        return [_from_gemini(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _from_gemini(v) if k in ("items", "anyOf") else v for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {k: _from_gemini(v) for k, v in node["properties"].items()}
    if out.pop("nullable", False):
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        else:
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
    return out


def _compacted(model: type[BaseModel]) -> dict[str, dict[str, Any]]:
    original = model.model_json_schema()
    out = {
        "compact": compact_schema(original),
        "anthropic": anthropic_input_schema(original),
        "openai (not strict)": openai_plain_parameters(original),
    }
    if not check_schema_for("gemini", original):  # lossless there: held to the same property
        out["gemini"] = _from_gemini(gemini_parameters(original))
    return out


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_compacted_schemas_validate_the_same_arguments(model: type[BaseModel]) -> None:
    original = model.model_json_schema()
    compacted = _compacted(model)
    for name, schema in compacted.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        if name != "gemini":  # Gemini inlines $defs: not always shorter, and not the point
            assert len(json.dumps(schema)) < len(json.dumps(original))  # it did compact

    @settings(
        max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(_arguments(original))
    def agree(arguments: dict[str, Any]) -> None:
        expected = _verdict(original, arguments)
        dispatched = drop_absent_nulls(original, arguments)  # what the executor validates
        assert _verdict(original, dispatched) == expected  # the dropping changes no verdict
        for name, schema in compacted.items():
            assert _verdict(schema, dispatched) == expected, (name, arguments)
            if _verdict(schema, arguments):  # the compact form only ever narrows
                assert expected, (name, arguments)

    agree()


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_dropping_absent_nulls_changes_nothing_the_function_gets(model: type[BaseModel]) -> None:
    """The executor's dropping, checked against Pydantic itself: same verdict, same values."""
    original = model.model_json_schema()

    @settings(
        max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(_arguments(original))
    def same(arguments: dict[str, Any]) -> None:
        dispatched = drop_absent_nulls(original, arguments)
        try:
            full = model.model_validate(arguments).model_dump()
        except ValidationError:
            full = None
        try:
            dropped = model.model_validate(dispatched).model_dump()
        except ValidationError:
            dropped = None
        assert full == dropped, arguments

    same()


def test_optional_form_is_taken_where_the_default_is_none() -> None:
    schema = ReminderSetArgs.model_json_schema()
    for name, out in _compacted(ReminderSetArgs).items():
        props = out["properties"]
        for field in ("at", "weekday", "cron"):
            assert props[field]["type"] == "string", (name, field)  # no null, not required
        assert out["required"] == ["text"], name
        assert props["text"]["minLength"] == 1 and props["text"]["maxLength"] == 1000
        assert props["kind"]["enum"] == ["once", "daily", "weekly", "cron"]
        if name != "gemini":  # Gemini has no defaults; the others keep a real one
            assert props["kind"]["default"] == "once"
    # The fields it applies to, and only those: not required, default None.
    assert drop_absent_nulls(schema, {"text": "x", "at": None, "kind": None}) == {
        "text": "x",
        "kind": None,
    }
    args = {"text": "x", "at": "9:00"}
    assert drop_absent_nulls(schema, args) is args  # nothing to drop: the same dict

    class NotNullable(BaseModel):
        s: str = None  # type: ignore[assignment]  # refuses null: not its optional form

    odd = NotNullable.model_json_schema()
    assert drop_absent_nulls(odd, {"s": None}) == {"s": None}
    assert compact_schema(odd)["properties"]["s"] == {"type": "string"}


def test_the_property_sees_both_verdicts() -> None:
    """The strategy is not vacuous: it produces arguments that pass and arguments that fail."""
    schema = ReminderSetArgs.model_json_schema()
    seen: set[bool] = set()

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(_arguments(schema))
    def collect(arguments: dict[str, Any]) -> None:
        seen.add(_verdict(schema, arguments))

    collect()
    assert seen == {True, False}


def test_nullable_fold_is_refused_where_it_would_change_meaning() -> None:
    # enum applies to null too: folding would reject null, so the anyOf stays.
    enum_branch = {"anyOf": [{"enum": ["a"], "type": "string"}, {"type": "null"}]}
    assert compact_schema(enum_branch) == {"anyOf": [{"enum": ["a"]}, {"type": "null"}]}
    ref_branch = {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}
    assert compact_schema(ref_branch) == ref_branch
    # A property literally called "title" or "default" is a name, not an annotation.
    named = {"type": "object", "properties": {"title": {"type": "string", "title": "Title"}}}
    assert compact_schema(named) == {"type": "object", "properties": {"title": {"type": "string"}}}
    # A real default is meaning (what an omitted field becomes): kept.
    assert compact_schema({"type": "integer", "default": 3}) == {"type": "integer", "default": 3}


def test_type_next_to_enum_goes_only_when_the_values_say_it() -> None:
    assert compact_schema({"enum": ["a", "b"], "type": "string"}) == {"enum": ["a", "b"]}
    assert compact_schema({"const": 3, "type": "integer"}) == {"const": 3}
    # true is not an integer in JSON Schema, 1.5 not one either: the type still narrows.
    for kept in (
        {"enum": [True, 1], "type": "integer"},
        {"enum": [1, 1.5], "type": "number"},
        {"enum": ["a", None], "type": "string"},
    ):
        assert compact_schema(kept) == kept
    # Strict OpenAI gets none of it (openai_parameters keeps type, and null in required fields).
    out, strict = openai_parameters(ReminderSetArgs.model_json_schema())
    assert strict is False  # minLength: sent non-strict, so compacted like the others
    assert out == openai_plain_parameters(ReminderSetArgs.model_json_schema())


def test_strict_openai_keeps_all_required_and_nullable() -> None:
    class Args(BaseModel):
        city: str
        unit: Literal["c", "f"] | None = None

    out, strict = openai_parameters(Args.model_json_schema())
    assert strict is True
    assert out["required"] == ["city", "unit"] and out["additionalProperties"] is False
    assert out["properties"]["unit"] == {
        "anyOf": [{"enum": ["c", "f"], "type": "string"}, {"type": "null"}]
    }
