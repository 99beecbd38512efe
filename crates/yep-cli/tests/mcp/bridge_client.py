"""Drives `yep mcp serve` with the official MCP Python SDK's client, as an agent would, and
prints what it saw as one JSON object for crates/yep-cli/tests/all/mcp.rs to check.

    python3 bridge_client.py <yep binary> <home>               # spawns `yep mcp serve`
    python3 bridge_client.py <yep binary> <home> <url> <token> # `yep mcp serve --http`

Steps: initialize; tools/list, then `yep list --json` (nothing may run yet); a lazy tool and
an MCP server's tool; `yep enable` of more packages (YEP and zot) from another process, waiting for
notifications/tools/list_changed; a call with progress; a cancelled call; a hook blocking and
one rewriting; a question answered through elicitation; prompts and resources.
"""
import contextlib
import json
import subprocess
import sys

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, PromptReference

YEP, HOME = sys.argv[1], sys.argv[2]
URL, TOKEN = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else (None, None)
report = {}


@contextlib.asynccontextmanager
async def connected():
    """The read and write streams of one connection to the bridge, on stdio or HTTP."""
    if URL is None:
        params = StdioServerParameters(command=YEP, args=["--home", HOME, "mcp", "serve"])
        async with stdio_client(params) as (read, write):
            yield read, write
    else:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, streamable_http_client(URL, http_client=http) as (read, write, *_):
            yield read, write


def yep(*args):
    out = subprocess.run([YEP, "--home", HOME, *args], capture_output=True, text=True, check=True)
    return out.stdout


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def main():
    changed = anyio.Event()
    asked = []

    statuses = []

    async def on_message(message):
        root = getattr(message, "root", message)
        method = getattr(root, "method", "")
        if method == "notifications/tools/list_changed":
            changed.set()
        elif method == "notifications/message":
            statuses.append(root.params.data)

    async def on_elicit(context, params):
        asked.append(params.message)
        return ElicitResult(action="accept", content={"answer": "blue"})

    async with connected() as (read, write):
        async with ClientSession(read, write, message_handler=on_message,
                                 elicitation_callback=on_elicit) as session:
            init = await session.initialize()
            report["instructions"] = init.instructions
            # What it advertises, it answers: `completions`, with no suggestions to give.
            report["completions_advertised"] = init.capabilities.completions is not None
            tools = await session.list_tools()
            report["tools_before"] = sorted(t.name for t in tools.tools)
            listed = json.loads(yep("list", "--json")) + json.loads(yep("mcp", "list", "--json"))
            report["states_after_list"] = {r["name"]: r["state"] for r in listed}

            result = await session.call_tool("t1", {"path": "a"})
            report["lazy_call"] = result.structured_content
            result = await session.call_tool("mcp__files__echo", {"text": "via mcp"})
            report["mcp_call"] = text_of(result)

            # Another terminal enables more: the client hears of it.
            yep("enable", "echo")
            yep("enable", "guard")
            yep("enable", "hops")
            with anyio.move_on_after(20):
                await changed.wait()
            report["list_changed"] = changed.is_set()
            tools = await session.list_tools()
            report["tools_after"] = sorted(t.name for t in tools.tools)

            result = await session.call_tool("a", {"path": []})
            report["zot_call"] = text_of(result)

            steps = []

            async def on_progress(progress, total, message):
                steps.append([progress, total])

            result = await session.call_tool("count", {"n": 3, "interval_ms": 10},
                                             progress_callback=on_progress)
            report["count"] = text_of(result)
            report["progress"] = steps

            # Updates sent back to back, the last one just before the result: none is lost
            # behind the result (the client drops progress for a call that has answered).
            burst = []

            async def on_burst(progress, total, message):
                burst.append(progress)

            await session.call_tool("count", {"n": 40, "interval_ms": 0},
                                    progress_callback=on_burst)
            report["burst_progress"] = burst

            with anyio.move_on_after(0.5) as scope:
                await session.call_tool("count", {"n": 100000, "interval_ms": 50})
            report["cancelled"] = scope.cancelled_caught
            result = await session.call_tool("echo", {"text": "after the cancel"})
            report["after_cancel"] = text_of(result)

            result = await session.call_tool("no_such_tool", {})
            report["unknown_tool"] = {"is_error": result.is_error, "text": text_of(result)}
            result = await session.call_tool("t1", {"path": "/etc/forbidden"})
            report["blocked"] = {"is_error": result.is_error, "text": text_of(result)}
            result = await session.call_tool("t1", {"path": "notes"})
            report["rewritten"] = result.structured_content

            result = await session.call_tool("ask", {"prompt": "favourite colour?"})
            report["ask"] = text_of(result)
            report["asked"] = asked
            report["statuses"] = statuses

            prompts = await session.list_prompts()
            report["prompts"] = sorted(p.name for p in prompts.prompts)
            done = await session.complete(PromptReference(type="ref/prompt", name="echo:ping"),
                                          {"name": "arguments", "value": "p"})
            report["completions"] = done.completion.values
            got = await session.get_prompt("echo:ping", {"arguments": "x"})
            report["prompt_text"] = got.messages[0].content.text
            resources = await session.list_resources()
            report["resources"] = sorted(str(r.uri) for r in resources.resources)
            if resources.resources:
                read = await session.read_resource(resources.resources[0].uri)
                report["skill_text"] = read.contents[0].text
            templates = await session.list_resource_templates()
            report["templates"] = [t.uri_template for t in templates.resource_templates]

            # `logging/setLevel` is answered (the Inspector gives up on a -32601). Statuses go
            # out at info: asked for warning and up, the client hears none as echo restarts;
            # asked for info again, it does.
            await session.set_logging_level("warning")
            report["set_level"] = "ok"
            before = len(statuses)
            yep("disable", "echo")
            await anyio.sleep(1.0)
            yep("enable", "echo")
            await anyio.sleep(2.0)
            report["statuses_while_warning"] = len(statuses) - before
            await session.set_logging_level("info")
            before = len(statuses)
            yep("disable", "echo")
            await anyio.sleep(1.0)
            yep("enable", "echo")
            # Its start says `echo ready` again (its stop, a clear, may come first).
            with anyio.move_on_after(15):
                while not any(s.get("status") == "echo ready" for s in statuses[before:]):
                    await anyio.sleep(0.05)
            report["statuses_at_info"] = len(statuses) - before
            # Echo is back: the next client's instructions hold its prompt.
            await anyio.sleep(0.5)
    # A new client after the echo extension was enabled gets its prompt as instructions.
    async with connected() as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            report["instructions_later"] = init.instructions
    print(json.dumps(report))


anyio.run(main)
