"""A server with typed tools, for test_typed.py: every kind of hint the SDK documents."""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
from typing import Annotated, Dict, List, Literal, Optional, TypedDict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from yep_sdk import Context, Server  # noqa: E402


class Units(enum.Enum):
    METRIC = "metric"
    IMPERIAL = "imperial"


@dataclasses.dataclass
class Place:
    """A point on the map."""

    lat: float
    lon: float = 0.0


class Window(TypedDict, total=False):
    start: int
    end: int


server = Server("typed")


@server.tool
def forecast(city: str, days: int = 3, units: Units = Units.METRIC,
             near: Optional[List[Place]] = None, mode: Literal["fast", "slow"] = "fast",
             weights: Dict[str, float] = None, window: Window = None,
             note: Annotated[str, "shown to the user"] = "", *, ctx: Context):
    """The weather for a city.

    Up to a week ahead."""
    ctx.update("forecasting %s" % city)
    return {
        "city": city,
        "days": days,
        "units": units.value,
        "near": [[p.lat, p.lon] for p in near or []],
        "mode": mode,
        "weights": weights,
        "window": window,
        "note": note,
    }


@server.tool("no-args", description="Takes nothing.")
def no_args():
    return "nothing"


@server.tool("raw")
def raw(args, ctx):
    return {"raw": args}


if __name__ == "__main__":
    server.serve()
