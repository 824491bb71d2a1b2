"""The per-provider schema rewrites, on the shapes Pydantic really generates."""

from __future__ import annotations

import json
from datetime import date, datetime
from enum import IntEnum, StrEnum
from typing import Annotated, Any, Literal

import pytest
from google.genai import types as gtypes
from pydantic import BaseModel, Field

from providers.schema import (
    SchemaError,
    anthropic_input_schema,
    check_schema_for,
    compact_schema,
    gemini_parameters,
    openai_parameters,
    openai_plain_parameters,
)


class Color(StrEnum):
    red = "red"
    blue = "blue"


class Priority(IntEnum):
    low = 1
    high = 2


class Address(BaseModel):
    street: str
    zip: Annotated[str, Field(min_length=5, max_length=5, pattern=r"^\d+$")]


class Everything(BaseModel):
    """Set a reminder."""

    at: datetime = Field(description="when")
    day: date | None = None
    color: Color
    priority: Priority = Priority.low
    mode: Literal["a", "b"]
    fixed: Literal["x"] = "x"
    tags: list[str]
    anything: list = []  # noqa: RUF012 - pydantic copies defaults
    meta: dict[str, int] = {}  # noqa: RUF012
    home: Address = Field(description="home address")
    work: Address | None = None
    count: Annotated[int, Field(gt=0, le=10)]
    pair: tuple[int, str] | None = None
    email: Annotated[str, Field(json_schema_extra={"format": "email"})] = ""


class Place(BaseModel):
    city: str
    when: datetime | None


class Strict(BaseModel):
    home: Place = Field(description="an address")
    note: str | None = None
    kind: Literal["p", "q"]
    stops: list[Place]


class Tree(BaseModel):
    name: str
    children: list[Tree] = []  # noqa: RUF012


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


# ------------------------------------------------------------------------------------- gemini


def test_gemini_everything() -> None:
    out = gemini_parameters(Everything.model_json_schema())
    # The SDK validates `parameters` with extra="forbid": this is what it will accept.
    gtypes.Schema.model_validate(out)
    keys = {k for node in _walk(out) for k in node}
    assert not keys & {
        "$ref",
        "$defs",
        "title",
        "default",
        "additionalProperties",
        "const",
        "exclusiveMinimum",
        "prefixItems",
        "examples",
    }
    props = out["properties"]
    assert out["type"] == "object" and out["description"] == "Set a reminder."
    assert props["at"] == {"description": "when", "format": "date-time", "type": "string"}
    # day and work default to None: their optional form, without null (nulls_meaning_absent).
    assert "nullable" not in props["day"] and props["day"]["type"] == "string"
    assert "format" not in props["day"] and "date" in props["day"]["description"]
    assert props["color"] == {"enum": ["red", "blue"], "type": "string"}
    # Integer enums cannot be Gemini enums (strings only): described instead.
    assert props["priority"]["type"] == "integer" and "enum" not in props["priority"]
    assert "1, 2" in props["priority"]["description"]
    assert props["mode"]["enum"] == ["a", "b"]
    assert props["fixed"]["enum"] == ["x"] and props["fixed"]["type"] == "string"
    assert props["tags"] == {"items": {"type": "string"}, "type": "array"}
    assert props["anything"]["items"] == {"type": "string"}
    assert props["meta"]["type"] == "object" and "properties" not in props["meta"]
    assert props["home"]["description"] == "home address"
    assert props["home"]["required"] == ["street", "zip"]
    assert props["home"]["properties"]["zip"]["minLength"] == 5
    assert props["home"]["properties"]["zip"]["pattern"] == r"^\d+$"
    assert "nullable" not in props["work"] and props["work"]["type"] == "object"
    assert "nullable" not in props["pair"] and "work" not in out["required"]
    assert props["count"]["maximum"] == 10 and "> 0" in props["count"]["description"]
    assert props["pair"]["items"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert props["pair"]["minItems"] == props["pair"]["maxItems"] == 2
    assert "format" not in props["email"] and "email" in props["email"]["description"]
    assert out["required"] == Everything.model_json_schema()["required"]


def test_gemini_rejects_recursion_and_bad_roots() -> None:
    with pytest.raises(SchemaError, match="recursive"):
        gemini_parameters(Tree.model_json_schema())
    with pytest.raises(SchemaError, match="root"):
        gemini_parameters({"type": "string"})
    with pytest.raises(SchemaError, match="unresolvable"):
        gemini_parameters({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})


def test_gemini_empty_and_odd_shapes() -> None:
    class NoArgs(BaseModel):
        pass

    assert gemini_parameters(NoArgs.model_json_schema()) == {"type": "object", "properties": {}}
    out = gemini_parameters(
        {
            "type": "object",
            "properties": {
                "a": {"type": ["integer", "null"]},
                "b": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
                "c": {"type": "array"},
                "d": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
                "e": {"type": "object", "properties": {}},
            },
            "required": ["a", "ghost"],
        }
    )
    gtypes.Schema.model_validate(out)
    p = out["properties"]
    assert p["a"] == {"type": "integer", "nullable": True}
    assert p["b"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "nullable": True}
    assert p["c"]["items"] == {"type": "string"}
    assert p["d"] == {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}
    assert p["e"] == {"type": "object"}
    assert out["required"] == ["a"]  # a required name with no property would be refused


def test_gemini_input_not_mutated() -> None:
    schema = Everything.model_json_schema()
    before = json.dumps(schema, sort_keys=True)
    gemini_parameters(schema)
    openai_parameters(schema)
    anthropic_input_schema(schema)
    assert json.dumps(schema, sort_keys=True) == before


# ------------------------------------------------------------------------------------- openai


def test_openai_strict_when_meaning_is_kept() -> None:
    out, strict = openai_parameters(Strict.model_json_schema())
    assert strict is True
    for node in _walk(out):
        assert "title" not in node and "default" not in node
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
    # optional-with-None became required-but-nullable: null still means "not given".
    # ... written in strict mode's documented optional form, a type list.
    assert out["properties"]["note"] == {"type": ["string", "null"]}
    # strict forbids siblings of $ref: the description moves next to an anyOf.
    assert out["properties"]["home"] == {
        "anyOf": [{"$ref": "#/$defs/Place"}],
        "description": "an address",
    }
    assert out["properties"]["kind"] == {"enum": ["p", "q"], "type": "string"}


@pytest.mark.parametrize("model", [Everything, Address])
def test_openai_not_strict_keeps_plain_schema(model: type[BaseModel]) -> None:
    # Everything: defaults that are not None, dicts; Address: minLength (unsupported in strict).
    out, strict = openai_parameters(model.model_json_schema())
    assert strict is False
    expected = model.model_json_schema()
    expected.pop("title")
    assert out == compact_schema(expected)
    assert openai_plain_parameters(model.model_json_schema()) == out


def test_openai_strict_refusals() -> None:
    class WithDefault(BaseModel):
        n: int = 3

    class WithDict(BaseModel):
        m: dict[str, int]

    class WithNoneDefaultNotNullable(BaseModel):
        s: str = None  # type: ignore[assignment]

    for model in (WithDefault, WithDict, WithNoneDefaultNotNullable):
        assert openai_parameters(model.model_json_schema())[1] is False

    class Empty(BaseModel):
        pass

    out, strict = openai_parameters(Empty.model_json_schema())
    assert strict is True
    assert out == {
        "properties": {},
        "type": "object",
        "required": [],
        "additionalProperties": False,
    }


# ---------------------------------------------------------------------------------- anthropic


def test_anthropic_keeps_json_schema() -> None:
    schema = Everything.model_json_schema()
    out = anthropic_input_schema(schema)
    # $defs, $ref, const: the Messages API takes them all; only the noise goes.
    assert out == compact_schema(schema)
    assert out["$defs"]["Address"]["properties"]["zip"] == {
        "maxLength": 5,
        "minLength": 5,
        "pattern": r"^\d+$",
        "type": "string",
    }
    # Optional with a None default: the optional form, null left out (nulls_meaning_absent).
    assert out["properties"]["day"] == {"format": "date", "type": "string"}
    assert out["properties"]["work"] == {"$ref": "#/$defs/Address"}
    assert out["properties"]["pair"]["type"] == "array"
    # A required field that admits null keeps null.
    place = anthropic_input_schema(Place.model_json_schema())
    assert place["properties"]["when"] == {"format": "date-time", "type": ["string", "null"]}
    # Enum values say their type; an empty default says only "nothing given".
    assert out["properties"]["mode"] == {"enum": ["a", "b"]}
    assert out["properties"]["fixed"] == {"const": "x", "default": "x"}
    assert out["properties"]["email"] == {"format": "email", "type": "string"}
    assert out["properties"]["priority"] == {"$ref": "#/$defs/Priority", "default": 1}
    # A recursive model stays as-is: Anthropic resolves $ref itself.
    assert anthropic_input_schema(Tree.model_json_schema())["type"] == "object"
    with pytest.raises(SchemaError):
        anthropic_input_schema({"type": "array", "items": {}})


# ---------------------------------------------------------------------------- health check


def test_check_schema_for() -> None:
    assert check_schema_for("openai", Everything.model_json_schema()) == []
    assert check_schema_for("anthropic", Everything.model_json_schema()) == []
    problems = check_schema_for("gemini", Everything.model_json_schema())
    assert any("$.meta" in p and "dict" in p for p in problems)
    assert any("$.anything" in p for p in problems)
    assert check_schema_for("gemini", Strict.model_json_schema()) == []
    assert any("recursive" in p for p in check_schema_for("gemini", Tree.model_json_schema()))
    assert check_schema_for("nope", {}) == ["unknown provider 'nope'"]
