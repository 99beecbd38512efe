"""Drives `yep mcp serve` with the official MCP Python SDK's client, as an agent would, and
prints what each step gave as one JSON list, for crates/yep-cli/tests/all/claude.rs.

    python3 claude_client.py <yep binary> <home> '<[step, ...]>'

Steps: ["call", tool, args] gives {"error": isError, "texts": [every text block]};
["prompt", name, arguments] the prompt's message texts; ["resources"] the resource URIs;
["read", uri] the resource's text; ["instructions"] the server's instructions. Questions
(elicitation) are declined, as a user who does not answer.
"""
import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ElicitResult

YEP, HOME, STEPS = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])


def field(obj, *names):
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    return None


async def main():
    async def on_elicit(context, params):
        return ElicitResult(action="decline")

    params = StdioServerParameters(command=YEP, args=["--home", HOME, "mcp", "serve"])
    seen = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            init = await session.initialize()
            for step in STEPS:
                kind = step[0]
                if kind == "call":
                    result = await session.call_tool(step[1], step[2])
                    texts = [getattr(block, "text", "") for block in result.content]
                    error = field(result, "is_error", "isError")
                    seen.append({"error": bool(error), "texts": texts})
                elif kind == "prompt":
                    result = await session.get_prompt(step[1], step[2])
                    seen.append([getattr(m.content, "text", "") for m in result.messages])
                elif kind == "resources":
                    result = await session.list_resources()
                    seen.append([str(r.uri) for r in result.resources])
                elif kind == "read":
                    result = await session.read_resource(step[1])
                    seen.append([getattr(c, "text", "") for c in result.contents])
                elif kind == "instructions":
                    seen.append(init.instructions or "")
    print(json.dumps(seen))


anyio.run(main)
