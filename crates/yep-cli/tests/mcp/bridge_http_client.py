"""Two clients on the official MCP Python SDK share `yep mcp serve --http`: one cancels a long
call while the other's call, with progress, runs to its end. A wrong or missing bearer token is
refused, and so is a `Host` that is not loopback unless the server was started with
`--allow-remote`. Prints what it saw as one JSON object.

    python3 bridge_http_client.py <url> <token>          # the two clients, then the probes
    python3 bridge_http_client.py <url> <token> probes   # the probes only
"""
import json
import sys
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN = sys.argv[1], sys.argv[2]
PROBES_ONLY = sys.argv[3:] == ["probes"]
report = {}


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def session_of(name, body):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    async with http, streamable_http_client(URL, http_client=http) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            report[name] = await body(session)


async def cancelling(session):
    """Starts a long call and cancels it, then is still answered."""
    seen = {}
    with anyio.move_on_after(0.5) as scope:
        await session.call_tool("count", {"n": 100000, "interval_ms": 20})
    seen["cancelled"] = scope.cancelled_caught
    result = await session.call_tool("echo", {"text": "after"})
    seen["after"] = text_of(result)
    return seen


async def counting(session):
    """A call with progress that spans the other client's cancel."""
    steps = []

    async def on_progress(progress, total, message):
        steps.append(progress)

    result = await session.call_tool("count", {"n": 10, "interval_ms": 100},
                                     progress_callback=on_progress)
    return {"result": text_of(result), "progress": len(steps),
            "tools": sorted(t.name for t in (await session.list_tools()).tools)}


async def status(token, host=None):
    """The status an `initialize` POST gets with this token (none: no header) and `Host`."""
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if host is not None:
        headers["Host"] = host
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}}
    async with httpx2.AsyncClient(timeout=20) as http:
        answer = await http.post(URL, headers=headers, json=initialize)
    return answer.status_code


async def main():
    if not PROBES_ONLY:
        async with anyio.create_task_group() as group:
            group.start_soon(session_of, "first", cancelling)
            group.start_soon(session_of, "second", counting)
    port = urlsplit(URL).port
    report["right"] = await status(TOKEN)
    report["wrong"] = await status("not-the-token")
    report["missing"] = await status(None)
    report["foreign_host"] = await status(TOKEN, host=f"yep.example:{port}")
    print(json.dumps(report))


anyio.run(main)
