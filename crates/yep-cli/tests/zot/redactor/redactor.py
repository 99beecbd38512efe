"""A zot extension that uses all four intercepts and observes lifecycle events, written here
from the protocol reference (current generation: it reads `hello_ack` first, then
registers and says `ready`).

- tool_call: `secret` in any argument string becomes `[redacted]` (`modified_args`);
- turn_start: step 3 and later are blocked;
- assistant_message: `secret` is replaced, a message with `forbidden` is hidden;
- before_agent_start: ` Be brief.` is appended to the system prompt;
- events: each observed event is appended to `<data_dir>/events.log` as
  `<sequence> <event> <session_id> <reason>`.
"""
import json
import os
import sys


def send(frame):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def redact(value):
    if isinstance(value, str):
        return value.replace("secret", "[redacted]")
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


send({"type": "hello", "name": "redactor", "version": "0.1.0"})
ack = json.loads(sys.stdin.readline())
data_dir = ack.get("data_dir") or "."
send({"type": "subscribe", "events": ["session_start", "session_end", "turn_end"],
      "intercept": ["tool_call", "turn_start", "assistant_message", "before_agent_start"]})
send({"type": "ready"})

for line in sys.stdin:
    frame = json.loads(line)
    kind = frame.get("type")
    if kind == "event":
        with open(os.path.join(data_dir, "events.log"), "a") as log:
            log.write("%d %s %s %s\n" % (frame["sequence"], frame["event"],
                                         frame["session_id"], frame.get("reason", "-")))
    elif kind == "event_intercept":
        event, reply = frame["event"], {"type": "event_intercept_response", "id": frame["id"]}
        if event == "tool_call":
            args = frame.get("tool_args") or {}
            if redact(args) != args:
                reply["modified_args"] = redact(args)
        elif event == "turn_start":
            if frame.get("step", 0) >= 3:
                reply.update(block=True, reason="redactor: three steps is enough")
        elif event == "assistant_message":
            if "forbidden" in frame["text"]:
                reply.update(block=True, reason="redactor hid it")
            else:
                reply["replace_text"] = redact(frame["text"])
        elif event == "before_agent_start":
            reply["system_prompt"] = frame["system_prompt"] + " Be brief."
        send(reply)
    elif kind == "shutdown":
        break
