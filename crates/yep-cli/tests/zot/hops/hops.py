"""A zot extension whose tools call the host's tools (`call_tool`), written here from the
protocol reference for the chain rules.

Tools `a` to `e` take `{"path": [{"tool": T, "args": A}, ...]}`: with an empty path they
answer their own name; else they call the first step under their own call (`parent_id`) and
answer `<name>><what it answered>`. `orphan` calls `a` with no parent while it runs; `stray`
names a parent that does not exist. `die` exits the process.
"""
import json
import sys


def send(frame):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


send({"type": "hello", "name": "hops", "capabilities": ["call_tool"]})
for name in ["a", "b", "c", "d", "e", "orphan", "stray", "die"]:
    send({"type": "register_tool", "name": name, "description": "hop " + name,
          "schema": {"type": "object"}})
send({"type": "ready"})

# The call_tool id -> (the tool_call it was made under, that tool's name).
pending = {}


def text_of(frame):
    return "".join(b.get("text", "") for b in frame.get("content") or [])


for line in sys.stdin:
    frame = json.loads(line)
    kind = frame.get("type")
    if kind == "tool_call":
        name, args, call_id = frame["name"], frame.get("args") or {}, frame["id"]
        nested = "n" + call_id
        if name == "die":
            sys.exit(1)
        if name == "orphan":
            pending[nested] = (call_id, name)
            send({"type": "call_tool", "id": nested, "name": "a", "args": {}})
        elif name == "stray":
            pending[nested] = (call_id, name)
            send({"type": "call_tool", "id": nested, "name": "a", "args": {},
                  "parent_id": "nope"})
        elif not args.get("path"):
            send({"type": "tool_result", "id": call_id,
                  "content": [{"type": "text", "text": name}]})
        else:
            step, rest = args["path"][0], args["path"][1:]
            pending[nested] = (call_id, name)
            send({"type": "call_tool", "id": nested, "name": step["tool"],
                  "args": step.get("args", {"path": rest}), "parent_id": call_id})
    elif kind == "tool_result" and frame.get("id") in pending:
        call_id, name = pending.pop(frame["id"])
        send({"type": "tool_result", "id": call_id, "is_error": frame.get("is_error", False),
              "content": [{"type": "text", "text": name + ">" + text_of(frame)}]})
    elif kind == "shutdown":
        break
