"""An MCP server built on the official MCP Python SDK, used by the host's tests as a real
third-party peer. It runs on either line of the SDK, as it was published: `mcp` 2.x
(`MCPServer`, which speaks 2026-07-28 too) and 1.x (`FastMCP`: 1.23.0 speaks up to 2025-06-18,
1.30.0 up to 2025-11-25).

    python3 sdk_server.py              serve on stdio
    python3 sdk_server.py --http PORT  serve streamable HTTP on 127.0.0.1:PORT at /mcp,
                                       printing `listening <port>` to stderr once ready

Environment:
  MCP_MARKER  a file; `started <pid>` is appended to it at start
  MCP_STATE   a JSON file {"echo_description": str, "extra_tool": bool}, both optional
  MCP_SLOW_START  seconds to wait before reading stdin (a server slow to start: a loaded
              machine, a big SDK to import)

Tools:
  echo {text}      -> the text (readOnlyHint)
  slow {steps}     -> `steps` progress notifications, then "done"; never returns if steps < 0
  ask              -> form elicitation for a colour, then "color: <answer>" / "declined" / "cancelled"
  crash            -> the process exits (status 3) without answering
  structured       -> structuredContent {"n": 1}
  fail             -> isError with "it failed"
  grow             -> adds tool `grown`, sends notifications/tools/list_changed, returns "grew"
  extra            -> "extra" (only when MCP_STATE says extra_tool)
"""
import argparse
import functools
import json
import os
import sys
import time
from typing import Annotated, TypedDict

import anyio
from pydantic import BaseModel

from mcp.server.lowlevel.server import NotificationOptions
from mcp.types import CallToolResult, ServerNotification, TextContent, ToolAnnotations, ToolListChangedNotification

try:  # 2.x
    from mcp.server.elicitation import ElicitationResult
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.resolve import Elicit, Resolve

    V2 = True
except ImportError:  # 1.x
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as MCPServer

    V2 = False


def load_state():
    path = os.environ.get("MCP_STATE")
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def mark_started():
    path = os.environ.get("MCP_MARKER")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"started {os.getpid()}\n")


class Count(TypedDict):
    n: int


class Colour(BaseModel):
    color: str


def build(state):
    # Only `structured` has structured output: MCPServer would otherwise wrap every `-> str`
    # result as structuredContent {"result": ...} and publish an outputSchema for it.
    if V2:
        server = MCPServer("yep-sdk-test-server", version="1.0.0", log_level="WARNING")
        low = server._lowlevel_server
    else:
        server = MCPServer("yep-sdk-test-server", log_level="WARNING")
        low = server._mcp_server
    # The server does send tools/list_changed (see `grow`), so say so in the handshake's
    # capabilities; the defaults leave listChanged off for handshake-era versions.
    low.create_initialization_options = functools.partial(
        low.create_initialization_options, NotificationOptions(tools_changed=True)
    )
    # The field names of 1.x are the wire's; 2.x has Python's.
    read_only = ToolAnnotations(read_only_hint=True) if V2 else ToolAnnotations(readOnlyHint=True)

    @server.tool(
        description=state.get("echo_description") or "Echo the text back",
        annotations=read_only,
        structured_output=False,
    )
    def echo(text: str) -> str:
        return text

    @server.tool(description="Report progress `steps` times, then answer; never answers if steps < 0", structured_output=False)
    async def slow(steps: int, ctx: Context) -> str:
        if steps < 0:
            await anyio.sleep_forever()
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
            await anyio.sleep(0.05)
        return "done"

    def answered(result) -> str:
        if result.action == "accept":
            return f"color: {result.data.color}"
        return "declined" if result.action == "decline" else "cancelled"

    if V2:
        # Asked through a resolver: at 2026-07-28 the question rides an InputRequiredResult
        # and the call comes again with the answer; at older revisions it is elicitation/create.
        def colour() -> Elicit[Colour]:
            return Elicit("What is your favourite colour?", Colour)

        @server.tool(description="Ask the user for a colour", structured_output=False)
        async def ask(result: Annotated[ElicitationResult[Colour], Resolve(colour)]) -> str:
            return answered(result)

    else:

        @server.tool(description="Ask the user for a colour", structured_output=False)
        async def ask(ctx: Context) -> str:
            return answered(await ctx.elicit("What is your favourite colour?", Colour))

    @server.tool(description="Exit the process at once without answering", structured_output=False)
    def crash() -> str:
        os._exit(3)

    @server.tool(description="Return structured content {\"n\": 1}")
    def structured() -> Count:
        return {"n": 1}

    @server.tool(description="Always fails")
    def fail() -> CallToolResult:
        # Raising ToolError("it failed") also gives isError, but the SDK prefixes the text with
        # "Error executing tool fail: "; a returned CallToolResult is sent as is.
        content = [TextContent(type="text", text="it failed")]
        return CallToolResult(content=content, is_error=True) if V2 else CallToolResult(content=content, isError=True)

    def grown() -> str:
        return "grown"

    @server.tool(description="Add the tool `grown` and announce the change", structured_output=False)
    async def grow(ctx: Context) -> str:
        if server._tool_manager.get_tool("grown") is None:
            server.add_tool(grown, name="grown", description="Added at run time by grow", structured_output=False)
        if V2:
            # To the clients listening at 2026-07-28 (`subscriptions/listen`).
            await ctx.notify_tools_changed()
        # To the others: request-scoped, so that on streamable HTTP it rides this call's
        # response stream. (A 2026-07-28 request has no session to send it on.)
        notice = ToolListChangedNotification() if V2 else ServerNotification(ToolListChangedNotification())
        try:
            await ctx.session.send_notification(notice, related_request_id=ctx.request_id)
        except Exception:
            pass
        return "grew"

    if state.get("extra_tool"):

        @server.tool(description="An extra tool offered when the state file asks for it", structured_output=False)
        def extra() -> str:
            return "extra"

    return server


async def serve_http(server, port):
    import uvicorn

    # 2.x takes the host it serves (for its DNS-rebinding guard); 1.x has it in its settings.
    app = server.streamable_http_app(host="127.0.0.1") if V2 else server.streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)

    async def announce():
        while not http.started:
            if http.should_exit:
                return
            await anyio.sleep(0.01)
        bound = port
        for s in getattr(http, "servers", []) or []:
            for sock in s.sockets:
                bound = sock.getsockname()[1]
        print(f"listening {bound}", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await http.serve()
        tg.cancel_scope.cancel()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    args = parser.parse_args()

    state = load_state()
    mark_started()
    time.sleep(float(os.environ.get("MCP_SLOW_START", "0")))
    server = build(state)
    if args.http is not None:
        anyio.run(serve_http, server, args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
