"""Compacted tool schemas accept exactly the arguments the Pydantic schemas accept.

Compaction drops titles and `default: null` and folds `anyOf [X, null]` into a type list; the
property below checks, with a JSON Schema validator, that no argument object changes verdict, on
the built-ins' argument models and on the odd shapes of test_schema.py.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from function_calls.builtins.reminders.functions import ReminderDeleteArgs, ReminderSetArgs
from function_calls.builtins.summary.functions import SummaryArgs
from function_calls.builtins.web_search.functions import WebSearchArgs
from providers.schema import anthropic_input_schema, compact_schema, openai_plain_parameters
from tests.providers.test_schema import Address, Everything, Place, Strict

MODELS: list[type[BaseModel]] = [
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


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_compacted_schemas_validate_the_same_arguments(model: type[BaseModel]) -> None:
    original = model.model_json_schema()
    compacted = {
        "compact": compact_schema(original),
        "anthropic": anthropic_input_schema(original),
        "openai (not strict)": openai_plain_parameters(original),
    }
    for schema in compacted.values():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert len(json.dumps(schema)) < len(json.dumps(original))  # it did compact

    @settings(
        max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(_arguments(original))
    def agree(arguments: dict[str, Any]) -> None:
        expected = _verdict(original, arguments)
        for name, schema in compacted.items():
            assert _verdict(schema, arguments) == expected, (name, arguments)

    agree()


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
    assert compact_schema(enum_branch) == enum_branch
    ref_branch = {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}
    assert compact_schema(ref_branch) == ref_branch
    # A property literally called "title" or "default" is a name, not an annotation.
    named = {"type": "object", "properties": {"title": {"type": "string", "title": "Title"}}}
    assert compact_schema(named) == {"type": "object", "properties": {"title": {"type": "string"}}}
    # A real default is meaning (what an omitted field becomes): kept.
    assert compact_schema({"type": "integer", "default": 3}) == {"type": "integer", "default": 3}
