"""Calls tools through `yep mcp serve` with the official MCP Python SDK's client, as an agent
would, and prints what each call gave as one JSON list, for crates/yep-cli/tests/claude.rs.

    python3 claude_client.py <yep binary> <home> '<[[tool, args], ...]>'

Each entry is {"error": isError, "texts": [every text block]}. Questions (elicitation) are
declined, as a user who does not answer.
"""
import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ElicitResult

YEP, HOME, CALLS = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])


async def main():
    async def on_elicit(context, params):
        return ElicitResult(action="decline")

    params = StdioServerParameters(command=YEP, args=["--home", HOME, "mcp", "serve"])
    seen = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            await session.initialize()
            for tool, args in CALLS:
                result = await session.call_tool(tool, args)
                texts = [getattr(block, "text", "") for block in result.content]
                seen.append({"error": bool(getattr(result, "is_error", None) or getattr(result, "isError", False)), "texts": texts})
    print(json.dumps(seen))


anyio.run(main)
