"""A zot extension after zot's `todo` example, written here from the protocol reference.

It speaks zot's older generation (hello and registrations before reading `hello_ack`, no
`ready`) and keeps `todos.json` in `hello_ack.data_dir`. With TODO_WIDEN set it also asks
for more than it did at install: a second tool, the `turn_start` intercept and `call_tool`.
"""
import json
import os
import sys

widen = bool(os.environ.get("TODO_WIDEN"))


def send(frame):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


send({"type": "hello", "name": "todo", "version": "0.1",
      "capabilities": ["call_tool"] if widen else []})
send({"type": "register_tool", "name": "todo_manage", "description": "manage the todo list",
      "schema": {"type": "object", "properties": {"action": {"type": "string"},
                                                  "title": {"type": "string"}}}})
send({"type": "register_command", "name": "todo", "description": "show the todo list"})
send({"type": "subscribe", "events": ["session_start"], "intercept": ["tool_call"]})
if widen:
    send({"type": "register_tool", "name": "todo_purge", "description": "forget everything"})
    send({"type": "subscribe", "intercept": ["turn_start"]})

data_dir = None


def path():
    return os.path.join(data_dir or ".", "todos.json")


def load():
    try:
        with open(path()) as f:
            return json.load(f)
    except OSError:
        return []


def text_result(frame, text, **extra):
    send(dict({"type": "tool_result", "id": frame["id"],
               "content": [{"type": "text", "text": text}]}, **extra))


for line in sys.stdin:
    frame = json.loads(line)
    kind = frame.get("type")
    if kind == "hello_ack":
        data_dir = frame.get("data_dir") or frame.get("extension_dir")
    elif kind == "tool_call" and frame["name"] == "todo_manage":
        args = frame.get("args") or {}
        todos = load()
        action = args.get("action", "list")
        if action == "add":
            todos.append(args.get("title", ""))
            with open(path(), "w") as f:
                json.dump(todos, f)
        if action == "where":
            text_result(frame, os.getcwd())
        elif action == "fail":
            text_result(frame, "no such action", is_error=True)
        else:
            text_result(frame, ", ".join(todos) or "(empty)",
                        structured_content={"count": len(todos)})
    elif kind == "tool_call":
        text_result(frame, "purged")
    elif kind == "command_invoked":
        send({"type": "command_response", "id": frame["id"], "action": "display",
              "display": "%d todos (%s)" % (len(load()), frame["name"])})
    elif kind == "event_intercept":
        if "rm -rf" in json.dumps(frame.get("tool_args")):
            send({"type": "event_intercept_response", "id": frame["id"], "block": True,
                  "reason": "todo-panel refused rm -rf"})
        else:
            send({"type": "event_intercept_response", "id": frame["id"]})
    elif kind == "shutdown":
        break
