// The TypeScript SDK's echo server passes every YEP server-side transcript of the conformance
// corpus (conformance/yep/server/), replayed by the corpus's own runner, conformance/run.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");
const ECHO = join(here, "..", "examples", "echo-server.js");

test("the echo server passes the YEP server corpus", () => {
  const out = spawnSync(
    "python3",
    [join(repo, "conformance", "run.py"), "server", join(repo, "conformance", "yep", "server"), "--", process.execPath, ECHO],
    { encoding: "utf8", timeout: 120_000 },
  );
  assert.equal(out.status, 0, out.stdout + out.stderr);
  assert.match(out.stdout, / passed, 0 failed/);
});
