"""Typed tools in the Python SDK, over a real process: the handshake carries the schemas
derived from the handlers' signatures, bad arguments are answered with errors naming the
field, and a raw ``def f(args, ctx)`` handler still gets the argument object.

Run from the repo root: python3 -m unittest discover -s sdk/python/tests -v
"""

import sys
import unittest
from pathlib import Path

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
        "weights": {"type": "object", "additionalProperties": {"type": "number"},
                    "default": None},
        "window": {"type": "object",
                   "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
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
        server = yep_sdk.Server("t")
        server.tool("a")(lambda args, ctx: args)
        server.tool("b")(lambda args, ctx=None: args)

        def typed_one(args: int, ctx):
            return args

        server.tool("c")(typed_one)
        self.assertEqual(server._served["a"], {"name": "a"})
        self.assertEqual(server._served["b"], {"name": "b"})
        self.assertEqual(server._served["c"]["schema"],
                         {"type": "object", "properties": {"args": {"type": "integer"}},
                          "required": ["args"]})


if __name__ == "__main__":
    unittest.main()
