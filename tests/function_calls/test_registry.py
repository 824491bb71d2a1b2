"""`@tool_function` declarations: what registers, and what fails at import time."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from function_calls.context import MessageContext
from function_calls.registry import (
    FunctionDefinitionError,
    PluginLoadError,
    Registry,
    tool_function,
)
from function_calls.spec import FunctionResult


class Args(BaseModel):
    text: str
    count: int = 1


def test_spec_built_from_annotation_and_docstring() -> None:
    reg = Registry()
    with reg.collecting():

        @tool_function(
            scope="group", require_at=True, admin_only=True, timeout=5, examples=["/echo text=hi"]
        )
        async def echo(ctx: MessageContext, args: Args) -> FunctionResult:
            """Repeat the text."""
            return FunctionResult(messages=[args.text])

    spec = reg.get("echo")
    assert spec is not None
    assert spec.description == "Repeat the text."
    assert spec.args_model is Args
    assert spec.parameters_schema["required"] == ["text"]
    assert "title" not in spec.parameters_schema
    assert (spec.scope, spec.require_at, spec.admin_only, spec.timeout) == ("group", True, True, 5)
    assert spec.is_async and spec.source.rsplit(":", 1)[0].endswith(Path(__file__).name)
    assert spec.single_text_field == "text"


def test_argument_free_function_has_empty_object_schema() -> None:
    reg = Registry()
    with reg.collecting():

        @tool_function(description="ping")
        def ping(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["pong"])

    spec = reg.get("ping")
    assert spec is not None and spec.args_model is None and not spec.is_async
    assert spec.parameters_schema == {"type": "object", "properties": {}}


def test_collecting_does_not_touch_global_registry() -> None:
    from function_calls.registry import registry as global_registry

    before = len(global_registry)
    reg = Registry()
    with reg.collecting():

        @tool_function(name="only_local_fn", description="x")
        def f(ctx: MessageContext) -> FunctionResult:
            return FunctionResult()

    assert "only_local_fn" in reg and "only_local_fn" not in global_registry
    assert len(global_registry) == before


@pytest.mark.parametrize("name", ["has space", "dots.not.ok", "x" * 65, "", "ünïcode"])
def test_names_providers_reject_fail_at_import(name: str) -> None:
    with Registry().collecting(), pytest.raises(FunctionDefinitionError, match="must match"):

        @tool_function(name=name, description="x")
        def f(ctx: MessageContext) -> FunctionResult:
            return FunctionResult()


def test_duplicate_name_names_both_places() -> None:
    reg = Registry()
    with reg.collecting():

        @tool_function(name="dup", description="x")
        def first(ctx: MessageContext) -> FunctionResult:
            return FunctionResult()

        with pytest.raises(FunctionDefinitionError, match="duplicate function name 'dup'") as e:

            @tool_function(name="dup", description="y")
            def second(ctx: MessageContext) -> FunctionResult:
                return FunctionResult()

    assert e.value.args[0].count("test_registry.py") == 2


@pytest.mark.parametrize("bad", ["no_params", "three", "not_model", "kwargs", "no_desc"])
def test_wrong_signatures_fail_with_function_and_file(bad: str) -> None:
    def no_params() -> FunctionResult:
        return FunctionResult()

    def three(ctx: MessageContext, args: Args, extra: int) -> FunctionResult:
        return FunctionResult()

    def not_model(ctx: MessageContext, args: dict) -> FunctionResult:
        return FunctionResult()

    def kwargs(ctx: MessageContext, **kw: object) -> FunctionResult:
        return FunctionResult()

    def no_desc(ctx: MessageContext) -> FunctionResult:
        return FunctionResult()

    func = locals()[bad]
    with Registry().collecting(), pytest.raises(FunctionDefinitionError) as e:
        tool_function(description=None if bad == "no_desc" else "d")(func)
    assert bad in str(e.value) and "test_registry.py" in str(e.value)


def test_plugins_load_into_their_registry(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "greet.py").write_text(
        "from pydantic import BaseModel\n"
        "from function_calls.registry import tool_function\n"
        "from function_calls.spec import FunctionResult\n"
        "class A(BaseModel):\n    name: str\n"
        "@tool_function(description='Greet someone')\n"
        "def greet(ctx, args: A) -> FunctionResult:\n"
        "    return FunctionResult(messages=[f'hi {args.name}'])\n"
    )
    (plugins / "_private.py").write_text("raise SystemExit('must not be imported')\n")
    reg = Registry()
    loaded = reg.load_plugins(["plugins"], base_dir=tmp_path)
    assert [p.name for p in loaded] == ["greet.py"]
    assert reg.get("greet") is not None
    # Loading the same directory into another registry works too (tests, several bots).
    assert Registry().load_plugins([plugins]) and True


def test_broken_plugin_names_file_and_cause(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import does_not_exist_anywhere\n")
    with pytest.raises(PluginLoadError, match=r"bad\.py.*ModuleNotFoundError"):
        Registry().load_plugins([tmp_path])
    (tmp_path / "bad.py").write_text(
        "from function_calls.registry import tool_function\n"
        "@tool_function(name='bad name', description='x')\n"
        "def f(ctx): pass\n"
    )
    with pytest.raises(PluginLoadError, match=r"bad\.py.*must match"):
        Registry().load_plugins([tmp_path])


def test_missing_plugin_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PluginLoadError, match="does not exist"):
        Registry().load_plugins(["nope"], base_dir=tmp_path)


class CityArgs(BaseModel):
    """Current weather for a city."""

    city: str = Field(description="City name, e.g. Paris")
    days: int = Field(default=1, description="How many days ahead")


def test_what_the_fields_say_is_not_repeated_in_the_description() -> None:
    """Sent with every request: a docstring's Args section that only repeats the fields'
    descriptions, and an args model docstring equal to the function's, go."""
    reg = Registry()
    with reg.collecting():

        @tool_function()
        async def weather(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            """Current weather for a city.

            Args:
                city: the city.
                days (int): how many days ahead,
                    counted from today.

            Returns:
                A forecast.
            """
            return FunctionResult()

        @tool_function()
        async def weather2(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            """Weather, with a caveat.

            Args:
                city: the city.
                ctx: the message context.
            """
            return FunctionResult()

        @tool_function(description="Current weather.\n\nArgs:\n    city: the city.")
        async def weather3(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            return FunctionResult()

    spec = reg.get("weather")
    assert spec is not None
    assert spec.description == "Current weather for a city.\n\nReturns:\n    A forecast."
    assert "description" not in spec.parameters_schema  # the model's docstring said the same
    assert spec.parameters_schema["properties"]["city"]["description"] == "City name, e.g. Paris"
    # `ctx` is not a field: the section says something the fields do not, so it stays.
    spec2 = reg.get("weather2")
    assert spec2 is not None and "ctx: the message context." in spec2.description
    assert spec2.parameters_schema["description"] == "Current weather for a city."
    # An explicit description is the author's wording: left alone.
    spec3 = reg.get("weather3")
    assert spec3 is not None and spec3.description.endswith("city: the city.")
