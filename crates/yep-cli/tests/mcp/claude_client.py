"""Drives `yep mcp serve` with the official MCP Python SDK's client, as an agent would, and
prints what each step gave as one JSON list, for crates/yep-cli/tests/all/claude.rs.

    python3 claude_client.py <yep binary> <home> '<[step, ...]>'

Steps: ["call", tool, args] gives {"error": isError, "texts": [every text block]};
["prompt", name, arguments] the prompt's message texts; ["resources"] the resource URIs;
["read", uri] the resource's text (or {"error": message}); ["instructions"] the server's instructions;
["extensions"] the server's `capabilities.extensions`; ["request", method, params] the result
of any other request (the skills extension's `skills/list`, `skills/get`), or {"error": code};
["digest", uri] the `sha256:` digest of the resource's bytes as read. Questions
(elicitation) are declined, as a user who does not answer.
"""
import base64
import hashlib
import json
import sys
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ElicitResult
from mcp_types import Request
from pydantic import TypeAdapter

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
                    try:
                        result = await session.read_resource(step[1])
                        seen.append([getattr(c, "text", "") for c in result.contents])
                    except Exception as e:  # an error answer: its message
                        seen.append({"error": str(e)})
                elif kind == "instructions":
                    seen.append(init.instructions or "")
                elif kind == "extensions":
                    caps = init.capabilities.model_dump(by_alias=True, exclude_none=True)
                    seen.append(caps.get("extensions"))
                elif kind == "request":
                    request = Request[dict[str, Any], str](method=step[1], params=step[2])
                    try:
                        seen.append(await session.send_request(request, TypeAdapter(dict)))
                    except Exception as e:  # an error answer: its code
                        seen.append({"error": getattr(getattr(e, "error", None), "code", str(e))})
                elif kind == "digest":
                    result = await session.read_resource(step[1])
                    content = result.contents[0]
                    text = getattr(content, "text", None)
                    raw = text.encode() if text is not None else base64.b64decode(content.blob)
                    seen.append("sha256:" + hashlib.sha256(raw).hexdigest())
    print(json.dumps(seen))


anyio.run(main)
