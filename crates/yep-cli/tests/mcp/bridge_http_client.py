"""Two clients on the official MCP Python SDK share `yep mcp serve --http`; a wrong or
missing bearer token is refused. Prints what it saw as one JSON object.

    python3 bridge_http_client.py <url> <token>
"""
import json
import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN = sys.argv[1], sys.argv[2]
report = {}


async def client(name, token):
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    async with streamable_http_client(URL, http_client=http) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            steps = []

            async def on_progress(progress, total, message):
                steps.append(progress)

            result = await session.call_tool("t1", {"path": name}, progress_callback=on_progress)
            report[name] = {"tools": sorted(t.name for t in tools.tools),
                            "result": result.structured_content}


async def refused(name, token):
    """The status an `initialize` POST gets with this token (none: no header)."""
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}}
    async with httpx2.AsyncClient(timeout=20) as http:
        answer = await http.post(URL, headers=headers, json=initialize)
    report[name] = answer.status_code


async def main():
    async with anyio.create_task_group() as group:
        group.start_soon(client, "first", TOKEN)
        group.start_soon(client, "second", TOKEN)
    await refused("wrong", "not-the-token")
    await refused("missing", None)
    print(json.dumps(report))


anyio.run(main)
