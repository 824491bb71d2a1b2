"""The function the fake model (bench/fake_openai.py) calls: loaded by bench_cluster.py."""

from pydantic import BaseModel

from function_calls import FunctionResult, MessageContext, tool_function


class WeatherArgs(BaseModel):
    city: str


@tool_function(name="get_weather", description="Current weather in a city.", scope="both")
async def get_weather(ctx: MessageContext, args: WeatherArgs) -> FunctionResult:
    return FunctionResult(llm_content=f"{args.city}: 18 °C, sunny")
