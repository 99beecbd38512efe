#!/usr/bin/env python3
"""The example capability server, on the Python SDK (the twin of examples/echo in Rust).

- ``echo {text}`` returns ``{"echoed": text}``;
- ``count {n, interval_ms}`` streams ``i/n`` updates, returns ``{"counted": n}``, cancellable;
- ``ask {prompt}`` returns ``{"answer": ...}`` from the user (``ui/ask``);
- a ``pre_tool_use`` hook blocks any call whose args carry ``"forbidden": true``;
- a static and a dynamic prompt, a ``ping`` command answering ``pong``, a status push at start.
"""

import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from yep_sdk import Server, block  # noqa: E402

server = Server(
    "echo",
    instructions="Use the echo tool to repeat text back; count streams progress.",
)
turns = itertools.count(1)


@server.tool("echo")
def echo(args, ctx):
    return {"echoed": args.get("text", "")}


@server.tool("count")
def count(args, ctx):
    n = args.get("n", 3)
    interval = args.get("interval_ms", 100) / 1000.0
    for i in range(1, n + 1):
        if ctx.sleep(interval):
            raise Exception("cancelled")
        ctx.update("%d/%d" % (i, n))
    return {"counted": n}


@server.tool("ask")
def ask(args, ctx):
    answer = ctx.ask(args.get("prompt", "What is your answer?"))
    if answer is None:
        raise Exception(ctx.ask_refused or "the user dismissed the question")
    return {"answer": answer}


@server.hook
def guard(params):
    args = params.get("args")
    if params["event"] == "pre_tool_use" and isinstance(args, dict) and args.get("forbidden") is True:
        return block("blocked by the echo example: args.forbidden is true")
    return None


@server.dynamic_prompt
def prompt():
    return "echo dynamic prompt, turn %d" % next(turns)


@server.command("ping")
def ping(arguments, ctx):
    return "pong"


@server.on_start
def start(ctx):
    ctx.status("echo ready")


if __name__ == "__main__":
    server.serve()
