// The official TypeScript MCP client (`@modelcontextprotocol/client`, pinned in scripts/test)
// against `yep mcp serve`, at one protocol revision: 2025-06-18 and 2025-11-25 through
// `initialize` (the client offers only that one), 2026-07-28 pinned (`server/discover`, no
// fallback). Prints one JSON report.
//
//   node ts_revisions.mjs <revision> stdio <yep> <home>
//   node ts_revisions.mjs <revision> http <url> <token>
import { join } from "node:path";

const [revision, transportKind, target, extra] = process.argv.slice(2);
const pkg = join(process.env.npm_config_prefix, "lib/node_modules/@modelcontextprotocol/client/dist");
const { Client, StreamableHTTPClientTransport } = await import(join(pkg, "index.mjs"));
const { StdioClientTransport } = await import(join(pkg, "stdio.mjs"));

const modern = revision >= "2026-07-28";
const client = new Client(
  { name: "ts-revisions", version: "1.0.0" },
  modern
    ? { versionNegotiation: { mode: { pin: revision } } }
    : { supportedProtocolVersions: [revision] },
);
const transport =
  transportKind === "stdio"
    ? new StdioClientTransport({
        command: target,
        args: ["mcp", "serve"],
        env: { YEP_HOME: extra, PATH: process.env.PATH },
        stderr: "ignore",
      })
    : new StreamableHTTPClientTransport(new URL(target), {
        requestInit: { headers: { Authorization: `Bearer ${extra}` } },
      });
const report = { revision };
try {
  await client.connect(transport);
  report.negotiated = client.getNegotiatedProtocolVersion();
  const names = async () => (await client.listTools()).tools.map((t) => t.name);
  report.tools = await names();
  report.tools_again = await names();
  const called = await client.callTool({ name: "echo", arguments: { text: "hi" } });
  report.call = called.structuredContent ?? called.content;
  report.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  report.resources = (await client.listResources()).resources.map((r) => r.uri);
} catch (e) {
  report.error = String(e);
}
await client.close().catch(() => {});
console.log(JSON.stringify(report));
