"""A raw JSON-RPC MCP server (stdio, 2025-06-18) whose `tools/list` can be slow while it
answers `initialize` and `tools/call` at once: a server that stalls a session that waits for
its list.

    python3 hang_list_server.py HANG_FILE

HANG_FILE: when it exists, each `tools/list` is answered that many seconds (its text) after
it came; when it does not, at once (as at approval).

Tools:
  echo {text}     -> the text
  wait {seconds}  -> "waited", that many seconds later
"""
import json
import os
import sys
import threading
import time

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {
        "name": "wait",
        "description": "Answer after some seconds",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    },
]

out = threading.Lock()


def send(message):
    with out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def answer(id, result):
    send({"jsonrpc": "2.0", "id": id, "result": result})


def text(id, said):
    answer(id, {"content": [{"type": "text", "text": said}], "isError": False})


def hang():
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            return float(f.read().strip() or "0")
    except OSError:
        return 0.0


def later(seconds, then):
    def run():
        time.sleep(seconds)
        then()

    threading.Thread(target=run, daemon=True).start()


def handle(message):
    method, id = message.get("method"), message.get("id")
    if id is None:
        return  # notifications
    params = message.get("params") or {}
    if method == "initialize":
        answer(
            id,
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "hang-list", "version": "1.0.0"},
            },
        )
    elif method == "tools/list":
        later(hang(), lambda: answer(id, {"tools": TOOLS}))
    elif method == "tools/call" and params.get("name") == "echo":
        text(id, (params.get("arguments") or {}).get("text", ""))
    elif method == "tools/call" and params.get("name") == "wait":
        seconds = float((params.get("arguments") or {}).get("seconds", 0))
        later(seconds, lambda: text(id, "waited"))
    else:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": f"no method {method}"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
# Stdin closed: the host is done with it.
os._exit(0)
