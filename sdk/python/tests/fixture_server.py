"""A small server the behaviour tests run as a subprocess (not a test module itself)."""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from yep_sdk import Server, YepError, modify  # noqa: E402

server = Server("fixture")
barrier = threading.Barrier(8, timeout=5)
notifier = []
configs = []


@server.tool("rendezvous")
def rendezvous(args, ctx):
    # Passes only when 8 calls run at the same time.
    barrier.wait()
    return {"met": True}


@server.tool("slow")
def slow(args, ctx):
    seconds = args.get("seconds", 0.2)
    if args.get("ignore_cancel"):
        time.sleep(seconds)
        return {"slept": seconds}
    if ctx.sleep(seconds):
        return {"late": True}  # dropped: the host already has `cancelled`
    return {"slept": seconds}


@server.tool("stream")
def stream(args, ctx):
    for i in range(args.get("n", 5)):
        ctx.update("line %d" % i)
    return {"lines": args.get("n", 5)}


@server.tool("ask")
def ask(args, ctx):
    return {"answer": ctx.ask(args["prompt"], secret=args.get("secret", False),
                              options=args.get("options"))}


@server.tool("noisy")
def noisy(args, ctx):
    print("STRAY print from a handler")
    os.write(1, b"STRAY raw fd-1 write\n")
    subprocess.run([sys.executable, "-c", "print('STRAY child process')"], check=True)
    return {"ok": True}


@server.tool("fail")
def fail(args, ctx):
    if args.get("typed"):
        raise YepError("typed failure", code=7, retryable=True)
    raise ValueError("plain failure")


@server.tool("unserializable")
def unserializable(args, ctx):
    return {"value": object()}


@server.tool("configs")
def get_configs(args, ctx):
    return {"configs": configs}


@server.hook
def hook(params):
    if params["event"] == "pre_tool_use" and params["args"].get("rewrite"):
        return modify({"rewritten": True})
    return None


@server.on_config
def on_config(config):
    configs.append(config)
    if isinstance(config, dict) and config.get("raise"):
        raise RuntimeError("config handler broke")
    if isinstance(config, dict) and config.get("restart"):
        return "restart-required"
    return "ok"


@server.on_start
def start(ctx):
    notifier.append(ctx)
    ctx.log("started", level="debug")


@server.on_trace
def trace(event):
    time.sleep(0.03)  # slower than the reader: shutdown must still wait for us
    notifier[0].log("trace %s" % event.get("id"))


@server.on_workspace
def workspace(root):
    notifier[0].log("workspace %s" % root)


if __name__ == "__main__":
    server.serve()
