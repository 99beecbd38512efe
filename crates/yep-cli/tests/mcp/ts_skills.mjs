// The official TypeScript MCP client's skills host (`SkillsClient` of
// `@modelcontextprotocol/client/ext/skills`, SEP-2640, pinned in scripts/test) against `yep mcp
// serve` on stdio, at one protocol revision: lists the skills, gets one, reads and verifies its
// SKILL.md and every other file (size, digest, frontmatter), and reads its directories. Prints
// one JSON report.
//
//   node ts_skills.mjs <revision> <yep> <home>
import { join } from "node:path";

const [revision, yep, home] = process.argv.slice(2);
const pkg = join(process.env.npm_config_prefix, "lib/node_modules/@modelcontextprotocol/client/dist");
const { Client } = await import(join(pkg, "index.mjs"));
const { StdioClientTransport } = await import(join(pkg, "stdio.mjs"));
const { SkillsClient } = await import(join(pkg, "ext/skills/index.mjs"));

const modern = revision >= "2026-07-28";
const client = new Client(
  { name: "ts-skills", version: "1.0.0" },
  modern
    ? { versionNegotiation: { mode: { pin: revision } } }
    : { supportedProtocolVersions: [revision] },
);
const transport = new StdioClientTransport({
  command: yep,
  args: ["mcp", "serve"],
  env: { YEP_HOME: home, PATH: process.env.PATH },
  stderr: "ignore",
});
const report = { revision };
try {
  await client.connect(transport);
  report.negotiated = client.getNegotiatedProtocolVersion();
  const skills = new SkillsClient(client);
  report.supported = skills.supported;
  report.directory_read = skills.directoryRead;
  const listing = await skills.list();
  report.invalid = listing.invalid;
  report.skills = listing.skills.map((s) => ({
    uri: s.uri,
    name: s.frontmatter.name,
    description: s.frontmatter.description,
    files: s.resources.map((r) => r.uri),
  }));
  report.reads = {};
  for (const skill of listing.skills) {
    const manifest = await skills.read(skill);
    report.reads[skill.uri] = {
      verified: manifest.verified,
      frontmatter: manifest.frontmatter,
      body_starts: manifest.body?.trim().slice(0, 40),
    };
    for (const file of skill.resources.slice(1)) {
      const read = await skills.read(skill, file.uri);
      report.reads[file.uri] = { verified: read.verified, bytes: read.bytes.length, text: read.text?.slice(0, 40) };
    }
    const root = skill.uri.slice(0, -"/SKILL.md".length);
    const dir = await skills.readDirectory(root);
    report.reads[root] = dir.resources.map((r) => [r.name, r.mimeType]);
    for (const sub of dir.resources.filter((r) => r.mimeType === "inode/directory")) {
      const inner = await skills.readDirectory(sub.uri);
      report.reads[sub.uri] = inner.resources.map((r) => [r.name, r.mimeType]);
    }
  }
  const first = listing.skills[0];
  if (first) {
    const got = await skills.get(first.uri);
    report.get = { uri: got.skill.uri, ttlMs: got.ttlMs, cacheScope: got.cacheScope };
  }
  try {
    await skills.get("skill://nobody/nothing/SKILL.md");
    report.unknown = "answered";
  } catch (e) {
    report.unknown = e.code ?? String(e);
  }
} catch (e) {
  report.error = String(e?.stack ?? e);
}
await client.close().catch(() => {});
console.log(JSON.stringify(report));
