"""A minimal MCP server on stdio (JSON-RPC 2.0, protocol 2025-06-18), from the standard library
only, for the sandbox's tests: what a git or filesystem server does, one system call each.

  git {args}          -> `git <args>` in its working directory: its stdout, or isError with
                         its exit status and stderr
  read {path}         -> the file's text, or isError with the OS error
                         (`[Errno 13] Permission denied: '/x'`)
  write {path, text}  -> writes the file ("wrote <path>"), or isError with the OS error

A path may start with `~/`, the home, and name variables (`$XDG_CONFIG_HOME/git/config`). It
answers an unknown request with -32601.
"""
import json
import os
import subprocess
import sys

TOOLS = [
    {"name": "git", "description": "runs git in the working directory",
     "inputSchema": {"type": "object", "properties": {
         "args": {"type": "array", "items": {"type": "string"}}}}},
    {"name": "read", "description": "reads a file",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                     "required": ["path"]}},
    {"name": "write", "description": "writes a file",
     "inputSchema": {"type": "object", "properties": {
         "path": {"type": "string"}, "text": {"type": "string"}}, "required": ["path"]}},
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(call_id, text, error=False):
    send({"jsonrpc": "2.0", "id": call_id,
          "result": {"content": [{"type": "text", "text": text}], "isError": error}})


def call(call_id, name, args):
    path = os.path.expandvars(os.path.expanduser(args.get("path", "")))
    try:
        if name == "git":
            done = subprocess.run(["git"] + args.get("args", []), capture_output=True, text=True)
            if done.returncode != 0:
                return result(call_id, f"git exited {done.returncode}: {done.stderr}", True)
            return result(call_id, done.stdout)
        if name == "read":
            with open(path, encoding="utf-8") as f:
                return result(call_id, f.read())
        if name == "write":
            with open(path, "w", encoding="utf-8") as f:
                f.write(args.get("text", ""))
            return result(call_id, f"wrote {path}")
    except OSError as e:
        sys.stderr.write(f"{name}: {e}\n")
        return result(call_id, str(e), True)
    send({"jsonrpc": "2.0", "id": call_id, "error": {"code": -32602, "message": "no such tool"}})


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, call_id = msg.get("method"), msg.get("id")
    if call_id is None:
        continue
    params = msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": call_id, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "files", "version": "1.0.0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": call_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        call(call_id, params.get("name"), params.get("arguments") or {})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": call_id, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": call_id,
              "error": {"code": -32601, "message": f"unknown method {method}"}})
