"""Typed tools in the Python SDK, over a real process: the handshake carries the schemas
derived from the handlers' signatures, bad arguments are answered with errors naming the
field, and a raw ``def f(args, ctx)`` handler still gets the argument object.

Run from the repo root: python3 -m unittest discover -s sdk/python/tests -v
"""

import sys
import unittest
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from test_sdk import PeerTest  # noqa: E402

import yep_sdk  # noqa: E402

FORECAST_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "default": 3},
        "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
        "near": {
            "anyOf": [
                {"type": "array", "items": {
                    "type": "object",
                    "description": "A point on the map.",
                    "properties": {"lat": {"type": "number"},
                                   "lon": {"type": "number", "default": 0.0}},
                    "required": ["lat"],
                }},
                {"type": "null"},
            ],
            "default": None,
        },
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        # A None default admits null, on every Python version.
        "weights": {"anyOf": [{"type": "object", "additionalProperties": {"type": "number"}},
                              {"type": "null"}],
                    "default": None},
        "window": {"anyOf": [{"type": "object", "properties": {"start": {"type": "integer"},
                                                               "end": {"type": "integer"}}},
                             {"type": "null"}],
                   "default": None},
        "note": {"type": "string", "description": "shown to the user", "default": ""},
    },
    "required": ["city"],
}


class TypedToolsTest(PeerTest):
    script = HERE / "typed_server.py"

    def forecast(self, args):
        return self.peer.call("tool/call", {"name": "forecast", "args": args})

    def error(self, args):
        msg = self.forecast(args)
        self.assertEqual(msg["error"]["code"], -32602, msg)
        return msg["error"]["message"]

    def test_the_handshake_carries_the_derived_schemas(self):
        tools = self.peer.handshake()["result"]["capability_params"]["tools"]
        self.assertEqual(tools, [
            {"name": "forecast", "description": "The weather for a city.\n\nUp to a week ahead.",
             "schema": FORECAST_SCHEMA},
            {"name": "no-args", "description": "Takes nothing.", "schema": {"type": "object"}},
            {"name": "raw"},
        ])

    def test_arguments_are_converted_and_defaults_filled(self):
        self.peer.handshake()
        msg = self.forecast({"city": "Oslo", "units": "imperial", "days": 2.0,
                             "near": [{"lat": 59}], "window": {"start": 1},
                             "weights": {"a": 1}})
        self.assertEqual(msg["result"], {
            "city": "Oslo", "days": 2, "units": "imperial", "near": [[59.0, 0.0]],
            "mode": "fast", "weights": {"a": 1.0}, "window": {"start": 1}, "note": ""})
        msg = self.peer.call("tool/call", {"name": "no-args"})
        self.assertEqual(msg["result"], "nothing")

    def test_bad_arguments_are_answered_with_the_field_named(self):
        self.peer.handshake()
        prefix = "invalid arguments for `forecast`: "
        self.assertEqual(self.error({}), prefix + "missing field `city`")
        self.assertEqual(self.error({"city": 3}), prefix + "`city`: expected a string, got an integer")
        self.assertEqual(self.error({"city": "a", "days": "two"}),
                         prefix + "`days`: expected an integer, got a string")
        self.assertEqual(self.error({"city": "a", "days": True}),
                         prefix + "`days`: expected an integer, got a boolean")
        self.assertEqual(self.error({"city": "a", "units": "kelvin"}),
                         prefix + '`units`: expected one of ["metric", "imperial"], got "kelvin"')
        self.assertEqual(self.error({"city": "a", "near": [{"lat": 1}, {"lon": 2}]}),
                         prefix + "`near[1]`: missing field `lat`")
        self.assertEqual(self.error({"city": "a", "near": [{"lat": "x"}]}),
                         prefix + "`near[0].lat`: expected a number, got a string")
        self.assertEqual(self.error({"city": "a", "mode": "medium"}),
                         prefix + '`mode`: expected one of ["fast", "slow"], got "medium"')
        self.assertEqual(self.error({"city": "a", "weights": {"w": "heavy"}}),
                         prefix + "`weights.w`: expected a number, got a string")
        self.assertEqual(self.error({"city": "a", "window": {"start": "soon"}}),
                         prefix + "`window.start`: expected an integer, got a string")
        self.assertEqual(self.error(["Oslo"]), prefix + "expected an object, got an array")

    def test_the_raw_form_gets_the_argument_object(self):
        self.peer.handshake()
        msg = self.peer.call("tool/call", {"name": "raw", "args": {"any": [1, "x"]}})
        self.assertEqual(msg["result"], {"raw": {"any": [1, "x"]}})


class RegistrationTest(unittest.TestCase):
    def test_a_hint_with_no_schema_is_refused_naming_the_parameter(self):
        server = yep_sdk.Server("t")
        with self.assertRaises(TypeError) as caught:
            @server.tool
            def bad(when: complex):
                return None
        self.assertIn("tool `bad`: parameter `when`", str(caught.exception))

    def test_a_wrapped_handler_is_read_through_its_decorator(self):
        import functools

        def logged(f):
            @functools.wraps(f)
            def wrapper(*args, **kwargs):
                return ("logged", f(*args, **kwargs))
            return wrapper

        server = yep_sdk.Server("t")

        @server.tool
        @logged
        def add(a: int, b: int = 1):
            """Adds."""
            return a + b

        self.assertEqual(server._served["add"], {
            "name": "add", "description": "Adds.",
            "schema": {"type": "object", "properties": {"a": {"type": "integer"},
                                                          "b": {"type": "integer", "default": 1}},
                       "required": ["a"]}})
        self.assertEqual(server._tools["add"]({"a": 2}, None), ("logged", 3))

    def test_which_handlers_are_raw(self):
        from typing import Any, Dict, Mapping

        server = yep_sdk.Server("t")
        server.tool("a")(lambda args, ctx: args)
        server.tool("b")(lambda args, ctx=None: args)
        server.tool("c")(lambda a, c: a)
        server.tool("star")(lambda *a: a[0])
        server.tool("first_star")(lambda args, *rest: args)
        server.tool("extra")(lambda args, ctx, verbose=False, **kw: args)

        def params(params: Dict[str, Any], ctx):
            return params

        def mapping(args: Mapping[str, Any], ctx: yep_sdk.Context):
            return args

        def plain(args: dict, ctx):
            return args

        def typed_one(args: int, ctx):
            return args

        def typed_two(city: str, days: int):
            return city

        for name, f in [("params", params), ("mapping", mapping), ("plain", plain),
                        ("typed_one", typed_one), ("typed_two", typed_two)]:
            server.tool(name)(f)
        for raw in ["a", "b", "c", "star", "first_star", "extra", "params", "mapping", "plain"]:
            self.assertEqual(server._served[raw], {"name": raw})
            self.assertNotIsInstance(server._tools[raw], yep_sdk._TypedTool)
        self.assertEqual(server._tools["params"]({"x": 1}, None), {"x": 1})
        self.assertEqual(server._tools["star"]({"x": 2}, None), {"x": 2})
        self.assertEqual(server._served["typed_one"]["schema"],
                         {"type": "object", "properties": {"args": {"type": "integer"}},
                          "required": ["args"]})
        self.assertEqual(server._served["typed_two"]["schema"]["required"], ["city", "days"])

    @unittest.skipUnless(sys.version_info >= (3, 11), "typing.NotRequired is Python 3.11+")
    def test_hints_beyond_the_basics(self):
        import dataclasses
        from typing import Literal, NotRequired, TypedDict, Union

        class A(TypedDict):
            x: int

        class B(TypedDict):
            x: int
            y: str
            note: NotRequired[str]

        @dataclasses.dataclass
        class D:
            a: int
            cache: int = dataclasses.field(default=0, init=False)

        server = yep_sdk.Server("t")

        @server.tool
        def t(ab: Union[A, B], num: Union[float, int], d: D, big: float = 0.0):
            return {"ab": ab, "num": num, "d": dataclasses.asdict(d), "big": big}

        schema = server._served["t"]["schema"]
        self.assertEqual(schema["properties"]["ab"]["anyOf"][1]["required"], ["x", "y"])
        self.assertEqual(schema["properties"]["d"]["properties"], {"a": {"type": "integer"}})
        tool = server._tools["t"]
        out = tool({"ab": {"x": 1, "y": "s"}, "num": 3, "d": {"a": 1}}, None)
        # The arm the object fits exactly wins, and an integer stays one.
        self.assertEqual(out["ab"], {"x": 1, "y": "s"})
        self.assertEqual(type(out["num"]), int)
        self.assertEqual(out["d"], {"a": 1, "cache": 0})
        with self.assertRaises(yep_sdk.YepError) as caught:
            tool({"ab": {"x": 1}, "num": 1, "d": {"a": 1}, "big": 10 ** 400}, None)
        self.assertEqual(caught.exception.code, -32602)
        self.assertIn("`big`: the number is too large", caught.exception.message)

        with self.assertRaises(TypeError) as caught:
            @server.tool
            def bad(mode: Literal[b"x"]):
                return None
        self.assertIn("parameter `mode`", str(caught.exception))
        self.assertIn("not a JSON value", str(caught.exception))

    def test_a_wrapped_cycle_does_not_hang_registration(self):
        def f(args, ctx):
            return args

        f.__wrapped__ = f
        server = yep_sdk.Server("t")
        server.tool("f")(f)
        self.assertEqual(server._served["f"], {"name": "f"})


def hostile(name, file):
    """A fixture from tests/fixtures/hostile/."""
    import json

    return json.loads((HERE.parents[2] / "tests" / "fixtures" / "hostile" / name / file).read_text())


class HostileArgumentsTest(unittest.TestCase):
    """Arguments built to exhaust the check (tests/fixtures/hostile/sdk-*), called in-process
    so what the conversion does can be watched."""

    def refused(self, tool, args):
        with self.assertRaises(yep_sdk.YepError) as caught:
            tool(args, None)
        self.assertEqual(caught.exception.code, -32602)
        return caught.exception.message

    def test_sdk_budget_overrun_is_refused_never_passed_through(self):
        from typing import List

        shape = hostile("sdk-budget-overrun", "arguments.json")
        values = [shape["fill"]] * shape["count"] + [shape["last"]]
        self.assertEqual(len(values), 10_002)
        ran = []
        server = yep_sdk.Server("t")

        @server.tool
        def counts(values: List[int]):
            ran.append(len(values))
            return len(values)

        tool = server._tools["counts"]
        self.assertEqual(
            self.refused(tool, {"values": values}),
            "invalid arguments for `counts`: the arguments are too large or complex to check "
            "within the SDK's budget of 10,000 checks")
        self.assertEqual(ran, [], "the handler ran with unchecked arguments")
        # Within the budget every item is checked, and lists of Any are not walked.
        self.assertEqual(tool({"values": values[:9_000]}, None), 9_000)
        self.assertEqual(self.refused(tool, {"values": [0, "x"]}),
                         "invalid arguments for `counts`: `values[1]`: expected an integer, got a string")

        @server.tool
        def anything(values: List[Any]):
            return len(values)

        self.assertEqual(server._tools["anything"]({"values": values * 3}, None), 30_006)

    def test_sdk_enum_megastring_is_refused_without_comparing_it(self):
        from typing import Literal

        shape = hostile("sdk-enum-megastring", "shape.json")
        names = ["%s%d" % (shape["member_prefix"], i) for i in range(shape["members"])]
        mega = shape["string_char"] * shape["string_chars"]
        server = yep_sdk.Server("t")

        @server.tool
        def pick(choice: Literal[tuple(names)]):  # type: ignore[valid-type]
            return choice

        tool = server._tools["pick"]
        self.assertEqual(tool({"choice": names[-1]}, None), names[-1])
        message = self.refused(tool, {"choice": mega})
        # The error shows a bounded preview of the string and of the members.
        self.assertLess(len(message), 1024)
        self.assertRegex(message, r'^invalid arguments for `pick`: `choice`: expected one of '
                                  r'\["v0", "v1", .*, …\] \(2000 values\), got "x{80}"… '
                                  r'\(1048576 characters\)$')

        # Deterministic stand-in for "fast": members that count their comparisons. Comparing
        # with each member cost 2,000 comparisons per checked value; a lookup costs none.
        compared = []

        class Counted(str):
            __hash__ = str.__hash__

            def __eq__(self, other):
                compared.append(1)
                return str.__eq__(self, other)

        counted = tuple(Counted(n) for n in names)

        @server.tool
        def pick_counted(choice: Literal[counted]):  # type: ignore[valid-type]
            return choice

        tool = server._tools["pick_counted"]
        self.refused(tool, {"choice": "warm"})  # the index is made once per type
        del compared[:]
        self.refused(tool, {"choice": mega})
        self.refused(tool, {"choice": "v7"})
        self.assertEqual(len(compared), 0)


if __name__ == "__main__":
    unittest.main()
