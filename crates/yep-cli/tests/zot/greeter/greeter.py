"""A zot extension of the current generation (registrations after `hello_ack`, then `ready`),
written here from the protocol reference: one tool, `greet`, whose schema requires `who` (a
string) and `times` (an integer of at least 1). It checks them itself too, and answers an
error naming what is wrong.

With GREETER_ID set, `greet` also requires an `id` matching a pattern that no simplest value
meets. With GREETER_EXIT=registering it exits (status 3) after registering and before
`ready`; with GREETER_EXIT=ready, right after `ready`, before the host shuts it down.
"""
import json
import os
import sys


def send(frame):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def give_up(when):
    sys.stderr.write("greeter: giving up %s\n" % when)
    sys.exit(3)


send({"type": "hello", "name": "greeter", "version": "0.1.0", "capabilities": []})
ack = json.loads(sys.stdin.readline())
properties = {"who": {"type": "string"}, "times": {"type": "integer", "minimum": 1}}
required = ["who", "times"]
if os.environ.get("GREETER_ID"):
    properties["id"] = {"type": "string", "pattern": "^[0-9]+$"}
    required.append("id")
send({"type": "register_tool", "name": "greet", "description": "greet someone",
      "schema": {"type": "object", "properties": properties, "required": required}})
exit_at = os.environ.get("GREETER_EXIT")
if exit_at == "registering":
    give_up("while registering")
send({"type": "ready"})
if exit_at == "ready":
    give_up("after ready")

for line in sys.stdin:
    frame = json.loads(line)
    kind = frame.get("type")
    if kind == "tool_call":
        args = frame.get("args") or {}
        who, times = args.get("who"), args.get("times")
        if not isinstance(who, str) or not isinstance(times, int) or times < 1:
            text, is_error = "greet needs who (a string) and times (at least 1)", True
        else:
            text, is_error = " ".join(["hello " + who] * times), False
        send({"type": "tool_result", "id": frame["id"], "is_error": is_error,
              "content": [{"type": "text", "text": text}]})
    elif kind == "shutdown":
        break
