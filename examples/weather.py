"""A weather-style tool server: typed tools, structured output, a resource template and a prompt.

Run it with ``python examples/weather.py`` (stdio) or ``mcpkit run examples/weather.py``. The data is made up so
the example runs offline; swap ``_lookup`` for a call to a real weather API.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from mcpkit import Context, MCPKit, ToolError

app = MCPKit("weather", version="1.0.0", instructions="Current weather and short forecasts for any city.")

Units = Literal["metric", "imperial"]


class Conditions(BaseModel):
    """The weather in one place at one time."""

    city: str
    temperature: float = Field(description="Temperature in the requested units")
    units: Units
    conditions: str
    humidity: int = Field(ge=0, le=100, description="Relative humidity in percent")


def _lookup(city: str, day: int = 0) -> tuple[float, str, int]:
    # deterministic fake data: the same city and day always get the same weather
    seed = int.from_bytes(hashlib.sha256(f"{city.lower()}:{day}".encode()).digest()[:4], "big")
    kinds = ["sunny", "partly cloudy", "cloudy", "light rain", "thunderstorms", "snow"]
    return round(-5 + (seed % 350) / 10, 1), kinds[seed % len(kinds)], 30 + seed % 70


def _convert(celsius: float, units: Units) -> float:
    return celsius if units == "metric" else round(celsius * 9 / 5 + 32, 1)


@app.tool(annotations={"readOnlyHint": True, "openWorldHint": True})
def get_weather(city: str, units: Units = "metric") -> Conditions:
    """Get the current weather for a city.

    Args:
        city: City name, e.g. "Lisbon".
        units: "metric" (Celsius) or "imperial" (Fahrenheit).
    """
    if not city.strip():
        raise ToolError("Please give a city name.")
    celsius, conditions, humidity = _lookup(city)
    return Conditions(
        city=city, temperature=_convert(celsius, units), units=units, conditions=conditions, humidity=humidity
    )


@app.tool(annotations={"readOnlyHint": True, "openWorldHint": True})
async def get_forecast(city: str, ctx: Context, days: int = Field(3, ge=1, le=7)) -> list[Conditions]:
    """A forecast of the next days for a city (reports progress per day).

    Args:
        city: City name.
        days: How many days, 1 to 7.
    """
    forecast = []
    for day in range(1, days + 1):
        celsius, conditions, humidity = _lookup(city, day)
        forecast.append(
            Conditions(city=city, temperature=celsius, units="metric", conditions=conditions, humidity=humidity)
        )
        await ctx.report_progress(day, days)
    await ctx.info(f"forecast for {city}: {days} days")
    return forecast


@app.resource("weather://{city}/current", mime_type="application/json")
def current(city: str) -> Conditions:
    """The current weather of a city, as a resource."""
    return get_weather(city)


@app.prompt
def plan_outfit(city: str, activity: str = "a walk") -> str:
    """Ask the model what to wear.

    Args:
        city: Where you are.
        activity: What you plan to do.
    """
    return f"Use get_weather for {city}, then suggest what to wear for {activity}."


if __name__ == "__main__":
    app.run()
