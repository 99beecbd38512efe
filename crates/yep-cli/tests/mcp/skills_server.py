"""An MCP server on the official MCP Python SDK (`mcp` 2.x, `MCPServer` with an `Extension`)
that offers skills as MCP's skills extension says (SEP-2640): `skills/list`, `skills/get`, and
each file as a resource, with its sha256 digest. For yep's MCP client tests.

    python3 skills_server.py <skills dir>

Each directory under <skills dir> with a `SKILL.md` is a skill, read at start:
`skill://<dir>/SKILL.md` and its other files under `skill://<dir>/`. It has one tool, `echo`.
"""
import hashlib
import os
import sys
from typing import Any

from mcp.server.extension import Extension, MethodBinding, ResourceBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources.types import TextResource
from mcp_types import PaginatedRequestParams, RequestParams

ROOT = sys.argv[1]


def frontmatter(text):
    """`key: value` lines between the first two `---` lines (enough for these fixtures)."""
    lines = text.split("\n")
    fields = {}
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip().strip('"')
    return fields


def load():
    skills = []
    for name in sorted(os.listdir(ROOT)):
        base = os.path.join(ROOT, name)
        if not os.path.isfile(os.path.join(base, "SKILL.md")):
            continue
        files = []
        for here, _, names in os.walk(base):
            for file in sorted(names):
                path = os.path.join(here, file)
                rel = os.path.relpath(path, base)
                with open(path, encoding="utf-8") as f:
                    files.append((rel, f.read()))
        files.sort(key=lambda f: (f[0] != "SKILL.md", f[0]))
        skill_md = dict(files)["SKILL.md"]
        entry = {
            "uri": f"skill://{name}/SKILL.md",
            "frontmatter": frontmatter(skill_md),
            "resources": [
                {"uri": f"skill://{name}/{rel}",
                 "digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
                 "size": len(text.encode())}
                for rel, text in files
            ],
        }
        skills.append((entry, files))
    return skills


SKILLS = load()


class GetParams(RequestParams):
    uri: str


class Skills(Extension):
    identifier = "io.modelcontextprotocol/skills"

    def resources(self):
        return [
            ResourceBinding(TextResource(uri=f"skill://{entry['uri'].split('/')[2]}/{rel}",
                                         name=rel, text=text, mime_type="text/markdown"))
            for entry, files in SKILLS for rel, text in files
        ]

    def methods(self):
        async def list_skills(ctx: Any, params: PaginatedRequestParams):
            return {"skills": [entry for entry, _ in SKILLS], "ttlMs": 0, "cacheScope": "private"}

        async def get_skill(ctx: Any, params: GetParams):
            for entry, _ in SKILLS:
                if entry["uri"] == params.uri:
                    return {"skill": entry, "ttlMs": 0, "cacheScope": "private"}
            from mcp.shared.exceptions import MCPError
            raise MCPError(-32602, f"no skill at {params.uri}")

        return [
            MethodBinding("skills/list", PaginatedRequestParams, list_skills),
            MethodBinding("skills/get", GetParams, get_skill),
        ]


server = MCPServer("skills-server", extensions=[Skills()])


@server.tool()
def echo(text: str) -> str:
    """Echoes the text."""
    return text


server.run()
