"""A zot extension written here from the protocol reference, for the zot dialect's tests.

argv[1] picks its generation:
  old  - zot's published examples: hello and every registration before reading anything,
         no capabilities, never `ready`;
  new  - the current SDK: hello with `tool_cancel` and `call_tool`, registrations after
         `hello_ack`, then `ready`;
  rude - its first line is not a hello;
  flood - registers 300 tools and 300 commands;
  mute - exits at once, saying nothing;
  deaf - the current generation, but it stops reading once it is ready;
  garbage - its first line is not JSON;
  huge - its first line is a 5 MiB hello;
  answer - its first line is a tool_result.
"""
import json
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "old"


def send(frame):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def register():
    send({"type": "register_tool", "name": "shout", "description": "upper-case text",
          "schema": {"type": "object", "properties": {"text": {"type": "string"}}}})
    send({"type": "register_tool", "name": "slow", "description": "never answers"})
    send({"type": "register_tool", "name": "relay", "description": "asks the host for shout"})
    send({"type": "register_tool", "name": "odd", "exposure": "sideways"})
    send({"type": "register_command", "name": "Greet", "description": "say hi"})
    send({"type": "register_command", "name": "greet", "description": "a case clash"})
    send({"type": "subscribe", "intercept": ["tool_call", "not_an_intercept"]})
    send({"type": "subscribe", "events": ["session_start", "turn_end", "no_such_event"],
          "intercept": ["turn_start", "assistant_message", "before_agent_start"]})


if mode == "garbage":
    print("starting up...", flush=True)
    sys.stdin.read()
    sys.exit(0)

if mode == "huge":
    send({"type": "hello", "name": "x" * (5 * 1024 * 1024)})
    sys.stdin.read()
    sys.exit(0)

if mode == "mute":
    sys.exit(3)

if mode == "answer":
    send({"type": "tool_result", "id": "1", "content": []})
    send({"type": "hello", "name": "late"})
    sys.stdin.read()
    sys.exit(0)

if mode == "rude":
    send({"type": "register_tool", "name": "early"})
    sys.exit(0)

if mode == "flood":
    send({"type": "hello", "name": "pyzot"})
    for i in range(300):
        send({"type": "register_tool", "name": "t%d" % i})
        send({"type": "register_command", "name": "c%d" % i})
    send({"type": "ready"})
    for line in sys.stdin:
        pass
    sys.exit(0)

send({"type": "hello", "name": "pyzot", "version": "0.1",
      "capabilities": ["tool_cancel", "call_tool"] if mode == "new" else []})
relayed = {}
if mode == "old":
    register()

if mode == "deaf":
    sys.stdin.readline()  # hello_ack
    register()
    send({"type": "ready"})
    import time
    time.sleep(60)
    sys.exit(0)

for line in sys.stdin:
    frame = json.loads(line)
    kind = frame.get("type")
    if kind == "hello_ack":
        if mode == "new":
            register()
            send({"type": "ready"})
        send({"type": "notify", "level": "info", "message": "acked " + frame.get("data_dir", "")})
    elif kind == "tool_result" and frame.get("id") in relayed:
        # The host's answer to a call_tool: handed back as this tool's result.
        send({"type": "tool_result", "id": relayed.pop(frame["id"]),
              "content": frame.get("content") or [], "is_error": frame.get("is_error", False)})
    elif kind == "tool_call":
        if frame["name"] == "relay":
            relayed["r" + frame["id"]] = frame["id"]
            send({"type": "call_tool", "id": "r" + frame["id"], "name": "shout",
                  "args": {"text": "x"}, "parent_id": frame["id"]})
        if frame["name"] == "shout":
            send({"type": "tool_result", "id": frame["id"], "structured_content": {"n": 1},
                  "content": [{"type": "text", "text": frame["args"].get("text", "").upper()},
                              {"type": "text", "text": ""}]})
    elif kind == "tool_cancel":
        send({"type": "notify", "level": "warn", "message": "cancelled " + frame["id"]})
    elif kind == "command_invoked" and frame.get("args") == "register":
        # A registration long after ready: still taken.
        send({"type": "register_tool", "name": "late", "description": "registered late"})
        send({"type": "command_response", "id": frame["id"], "action": "noop"})
    elif kind == "command_invoked" and frame.get("args", "").startswith("action "):
        # `action <name> [error]`: answers with that action (and an error, when asked).
        words = frame["args"].split(" ")
        reply = {"type": "command_response", "id": frame["id"], "action": words[1],
                 "prompt": "a prompt", "insert": "an insert", "display": "a display",
                 "tool_name": "shout", "tool_args": {"text": "x"},
                 "open_panel": {"id": "p1", "title": "T", "lines": ["l1", "l2"]}}
        if len(words) > 2:
            reply["error"] = "it failed"
        send(reply)
    elif kind == "command_invoked":
        send({"type": "command_response", "id": frame["id"], "action": "display",
              "display": "hi " + frame.get("args", "") + " via " + frame["name"]})
    elif kind == "event":
        send({"type": "notify", "level": "info", "message": "event %s %d %s" % (
            frame["event"], frame["sequence"], frame["session_id"])})
    elif kind == "event_intercept" and frame["event"] == "turn_start":
        send({"type": "event_intercept_response", "id": frame["id"],
              "block": frame["step"] >= 3, "reason": "too many steps"})
    elif kind == "event_intercept" and frame["event"] == "assistant_message":
        text = frame["text"]
        if "forbidden" in text:
            send({"type": "event_intercept_response", "id": frame["id"], "block": True,
                  "reason": "hidden"})
        else:
            send({"type": "event_intercept_response", "id": frame["id"],
                  "replace_text": text.replace("secret", "[redacted]")})
    elif kind == "event_intercept" and frame["event"] == "before_agent_start":
        send({"type": "event_intercept_response", "id": frame["id"],
              "system_prompt": frame["system_prompt"] + " (" + frame["model"] + ")"})
    elif kind == "event_intercept" and "garble" in json.dumps(frame.get("tool_args")):
        send({"type": "event_intercept_response", "id": frame["id"],
              "modified_args": "not an object"})
    elif kind == "event_intercept":
        if "rm -rf" in json.dumps(frame.get("tool_args")):
            send({"type": "event_intercept_response", "id": frame["id"], "block": True,
                  "reason": "no rm -rf"})
        else:
            send({"type": "event_intercept_response", "id": frame["id"]})
    elif kind == "shutdown":
        send({"type": "shutdown_ack"})
        break
