"""A zot extension of the current generation, written here from the protocol reference, for
the sandbox's tests: one tool, `attempt` {kind, path}, that does one thing to a path relative
to the project (`hello_ack.cwd`) and answers `ok` or the OS error.

  write    writes the file ("x")
  mkdir    makes the directory
  symlink  makes a link to /etc/passwd
"""
import json
import os
import sys


def send(frame):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


send({"type": "hello", "name": "notebook", "version": "0.1.0", "capabilities": []})
ack = json.loads(sys.stdin.readline())
project = ack.get("cwd") or "."
send({"type": "register_tool", "name": "attempt", "description": "try one thing",
      "schema": {"type": "object", "properties": {
          "kind": {"type": "string"}, "path": {"type": "string"}}}})
send({"type": "ready"})

for line in sys.stdin:
    frame = json.loads(line)
    if frame.get("type") == "shutdown":
        break
    if frame.get("type") != "tool_call":
        continue
    args = frame.get("args") or {}
    path = os.path.join(project, args.get("path", ""))
    try:
        kind = args.get("kind")
        if kind == "write":
            with open(path, "w") as f:
                f.write("x")
        elif kind == "mkdir":
            os.mkdir(path)
        elif kind == "symlink":
            os.symlink("/etc/passwd", path)
        text = "ok"
    except OSError as e:
        text = "%s: %s" % (type(e).__name__, e.strerror)
    send({"type": "tool_result", "id": frame["id"], "is_error": False,
          "content": [{"type": "text", "text": text}]})
