"""A zot extension after zot's `todo` example, written here from the protocol reference.

It speaks zot's older generation (hello and registrations before reading `hello_ack`, no
`ready`) and keeps `todos.json` in `hello_ack.data_dir`. Its command `todo` opens the panel
`todos-main` (up/down move the selection, `x` marks done, enter submits the selected todo as
a prompt, esc closes); `todo count` displays how many there are. Like zot's example, its
tool renders the panel whether or not it is open. With TODO_WIDEN set it also asks for more
than it did at install: a second tool, the `turn_start` intercept and `call_tool`.
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
                                                  "title": {"type": "string"}}},
      "output_schema": {"type": "object", "properties": {"count": {"type": "integer"}}}})
send({"type": "register_tool", "name": "todo_archive", "description": "archive done todos",
      "exposure": "deferred"})
send({"type": "register_tool", "name": "todo_pick", "description": "pick a todo in a panel",
      "interactive": True})
send({"type": "register_command", "name": "todo", "description": "show the todo list"})
send({"type": "subscribe", "events": ["session_start"], "intercept": ["tool_call"]})
if widen:
    send({"type": "register_tool", "name": "todo_purge", "description": "forget everything"})
    send({"type": "subscribe", "intercept": ["turn_start"]})

data_dir = None
selected = 0
panel_open = False


def path():
    return os.path.join(data_dir or ".", "todos.json")


def load():
    try:
        with open(path()) as f:
            return json.load(f)
    except OSError:
        return []


def panel_lines():
    todos = load()
    return ["%s%s" % ("▸ " if i == selected else "  ", t) for i, t in enumerate(todos)] \
        or ["(no todos)"]


def render():
    send({"type": "panel_render", "panel_id": "todos-main", "lines": panel_lines(),
          "footer": "up/down move · x done · enter submit · esc close"})


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
            render()
        if action == "where":
            text_result(frame, os.getcwd())
        elif action == "fail":
            text_result(frame, "no such action", is_error=True)
        elif action == "list":
            # Listing makes the archive tool worth loading.
            text_result(frame, ", ".join(todos) or "(empty)",
                        structured_content={"count": len(todos)},
                        activate_tools=["todo_archive", "not_mine"])
        else:
            text_result(frame, ", ".join(todos) or "(empty)",
                        structured_content={"count": len(todos)})
    elif kind == "tool_call":
        text_result(frame, "purged")
    elif kind == "command_invoked" and frame.get("args") == "count":
        send({"type": "command_response", "id": frame["id"], "action": "display",
              "display": "%d todos (%s)" % (len(load()), frame["name"])})
    elif kind == "command_invoked":
        selected, panel_open = 0, True
        send({"type": "command_response", "id": frame["id"], "action": "open_panel",
              "open_panel": {"id": "todos-main", "title": "Todos", "lines": panel_lines(),
                             "footer": "up/down move · x done · enter submit · esc close"}})
    elif kind == "panel_key" and frame["panel_id"] == "todos-main":
        todos = load()
        key = frame["key"]
        if key == "down":
            selected = min(selected + 1, max(len(todos) - 1, 0))
        elif key == "up":
            selected = max(selected - 1, 0)
        elif key == "rune" and frame.get("text") == "x" and todos:
            todos[selected] = "✓ " + todos[selected].lstrip("✓ ")
            with open(path(), "w") as f:
                json.dump(todos, f)
        elif key == "enter" and todos:
            send({"type": "submit", "text": "  work on: %s  " % todos[selected]})
        render()
    elif kind == "panel_close":
        panel_open = False
        send({"type": "notify", "level": "info", "message": "panel closed"})
    elif kind == "event_intercept":
        if "rm -rf" in json.dumps(frame.get("tool_args")):
            send({"type": "event_intercept_response", "id": frame["id"], "block": True,
                  "reason": "todo-panel refused rm -rf"})
        else:
            send({"type": "event_intercept_response", "id": frame["id"]})
    elif kind == "shutdown":
        break
