// Drift guards against schema/yep/v1 and behaviour tests over real pipes.
// Run from the repo root: `node --test sdk/typescript/test/`.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { PassThrough } from "node:stream";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as sdk from "../yep-sdk.js";

const here = dirname(fileURLToPath(import.meta.url));
const sdkDir = join(here, "..");
const repo = join(sdkDir, "..", "..");
const meta = JSON.parse(readFileSync(join(repo, "schema", "yep", "v1", "meta.json"), "utf8"));
const schema = JSON.parse(readFileSync(join(repo, "schema", "yep", "v1", "schema.json"), "utf8"));
const ECHO = join(sdkDir, "examples", "echo-server.js");
const SDK_URL = pathToFileURL(join(sdkDir, "yep-sdk.js")).href;

/**
 * A test server for what the echo example does not exercise: overlap, stray output,
 * cancellation seen from the handler, ordered trace handling, config, workspace.
 * It runs from source (`node --input-type=module -e`) because any .js file under test/ would
 * itself be taken for a test file by `node --test`.
 */
async function fixtureServer({ Server, YepError, modify }) {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let notifier = null;
  let waiting = [];
  let configs = 0;
  await new Server("fixture")
    .tool("barrier", (args) =>
      // Resolves only once `n` calls wait at the same time: it proves calls overlap.
      new Promise((resolve) => {
        waiting.push(resolve);
        if (waiting.length >= args.n) {
          const all = waiting;
          waiting = [];
          for (const r of all) r({ met: args.n });
        }
      }),
    )
    .tool("noisy", async () => {
      console.log("stray console.log");
      console.info("stray console.info");
      console.debug("stray console.debug");
      process.stdout.write("stray process.stdout.write\n");
      return { ok: true };
    })
    .tool("wait", (_args, ctx) =>
      new Promise((resolve) => {
        ctx.signal.addEventListener("abort", () => {
          ctx.update("must not be sent");
          ctx.log(`aborted ${ctx.requestId} ${ctx.signal.aborted}`, "debug");
          resolve({ late: "this answer must be dropped" });
        });
      }),
    )
    .tool("fail", async (args) => {
      if (args?.typed) throw new YepError("typed failure", { code: 42, retryable: true, data: { why: "test" } });
      throw new Error("plain failure");
    })
    .onHook(async (fire) => (fire.tool_name === "rewrite" ? modify({ path: "/safe" }) : undefined))
    .onConfig(async (config) => {
      configs += 1;
      notifier?.log(`config ${configs} ${JSON.stringify(config)}`);
      return config?.restart ? "restart-required" : "ok";
    })
    .onWorkspace((root) => notifier.log(`workspace ${root}`))
    .onTrace(async (event) => {
      await sleep(20);
      notifier.log(`trace ${event.id}`);
    })
    .onStart((n) => {
      notifier = n;
      n.status("fixture ready", "warn", "long form");
    })
    .serve();
}

const FIXTURE = {
  args: ["--input-type=module", "-e", `(${fixtureServer})(await import(${JSON.stringify(SDK_URL)}));`],
};

/** A host stand-in: spawns a server, speaks the wire, records everything. */
class Peer {
  constructor(script) {
    const args = typeof script === "string" ? [script] : script.args;
    this.child = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "pipe"] });
    this.messages = [];
    this.rawLines = [];
    this.stderr = "";
    this.waiters = new Set();
    this.nextId = 1;
    this.onAsk = null;
    let pending = "";
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk) => {
      pending += chunk;
      let nl;
      while ((nl = pending.indexOf("\n")) !== -1) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        this.rawLines.push(line);
        let msg;
        try {
          msg = JSON.parse(line);
        } catch {
          msg = { unparsable: line };
        }
        this.messages.push(msg);
        if (msg.method === "ui/ask" && typeof msg.id === "number" && this.onAsk) this.onAsk(msg);
        for (const w of this.waiters) w();
      }
    });
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk) => (this.stderr += chunk));
    this.exited = new Promise((resolve) => this.child.on("exit", (code, signal) => resolve({ code, signal })));
    this.child.stdin.on("error", () => {});
  }

  send(obj) {
    this.child.stdin.write(JSON.stringify(obj) + "\n");
  }

  notify(method, params) {
    this.send(params === undefined ? { method } : { method, params });
  }

  /** Send a request; resolves with its response message. */
  request(method, params) {
    const id = this.nextId++;
    this.send(params === undefined ? { id, method } : { id, method, params });
    return this.waitFor((m) => m.id === id && !("method" in m), `response to ${method} #${id}`);
  }

  /** Resolves with the first recorded message matching `pred` (past or future). */
  waitFor(pred, what = "a message", timeoutMs = 5000) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.messages.find(pred);
        if (!found) return false;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.messages)}; stderr ${this.stderr}`));
      }, timeoutMs);
      if (!check()) this.waiters.add(check);
    });
  }

  async handshake() {
    const init = await this.request("initialize", { protocol_version: "1.0", config: { k: 1 } });
    this.notify("initialized");
    return init;
  }

  /** Close stdin (EOF) and wait for the process to exit. */
  close() {
    this.child.stdin.end();
    return this.exited;
  }

  kill() {
    if (this.child.exitCode === null) this.child.kill();
  }
}

async function withPeer(script, fn) {
  const peer = new Peer(script);
  try {
    return await fn(peer);
  } finally {
    peer.kill();
  }
}

const responsesTo = (peer, id) => peer.messages.filter((m) => m.id === id && !("method" in m));
const delay = (ms) => new Promise((r) => setTimeout(r, ms));

describe("drift guards", () => {
  test("HOST_METHODS covers every host-direction method in meta.json", () => {
    const host = meta.methods.filter((m) => m.direction === "host").map((m) => m.name);
    assert.ok(host.length > 0);
    for (const name of host) assert.ok(sdk.HOST_METHODS.includes(name), `HOST_METHODS lacks ${name}`);
    const known = new Set(meta.methods.map((m) => m.name));
    for (const name of sdk.HOST_METHODS) assert.ok(known.has(name), `${name} is not in meta.json`);
  });

  test("advertisable capability tokens are a subset of meta.json capabilities", () => {
    for (const token of sdk.CAPABILITIES) {
      assert.ok(meta.capabilities.includes(token), `${token} is not a meta.json capability`);
    }
  });

  test("PROTOCOL_VERSION matches meta.json and schema.json", () => {
    assert.equal(sdk.PROTOCOL_VERSION, meta.version);
    assert.equal(sdk.PROTOCOL_VERSION, schema.protocol_version);
    assert.ok(sdk.versionCompatible(meta.min_version));
  });

  test("error codes match docs/protocol.md", () => {
    const doc = readFileSync(join(repo, "docs", "protocol.md"), "utf8");
    for (const code of [-32601, -32602, -32800, -32001]) assert.ok(doc.includes(String(code)), `${code}`);
    assert.equal(sdk.ERROR_CODES.CANCELLED, -32800);
    assert.equal(sdk.ERROR_CODES.METHOD_NOT_FOUND, -32601);
    assert.equal(sdk.ERROR_CODES.INCOMPATIBLE_VERSION, -32001);
  });

  test("yep-sdk.d.ts declares every exported name", () => {
    const dts = readFileSync(join(sdkDir, "yep-sdk.d.ts"), "utf8");
    const names = Object.keys(sdk);
    assert.ok(names.length >= 10);
    for (const name of names) {
      const re = new RegExp(`export\\s+declare\\s+(const|function|class)\\s+${name}\\b`);
      assert.match(dts, re, `yep-sdk.d.ts does not declare ${name}`);
    }
  });

  test("package.json points at the SDK and has no dependencies", () => {
    const pkg = JSON.parse(readFileSync(join(sdkDir, "package.json"), "utf8"));
    assert.equal(pkg.name, "@yep/sdk");
    assert.equal(pkg.type, "module");
    assert.equal(pkg.main, "./yep-sdk.js");
    assert.equal(pkg.types, "./yep-sdk.d.ts");
    assert.equal(pkg.engines.node, ">=18");
    assert.equal(pkg.dependencies, undefined);
    assert.equal(pkg.devDependencies, undefined);
  });
});

describe("echo example over pipes", () => {
  test("handshake advertises the handlers it has", () =>
    withPeer(ECHO, async (peer) => {
      const init = await peer.handshake();
      assert.deepEqual(init.result, {
        protocol_version: "1.0",
        name: "echo",
        capabilities: ["tools", "streaming", "cancel", "prompt", "dynamic_prompt", "hooks", "commands"],
        capability_params: {
          tools: [{ name: "echo" }, { name: "count" }, { name: "ask" }],
          prompt: { static: "Use the echo tool to repeat text back; count streams progress." },
        },
      });
      for (const token of init.result.capabilities) assert.ok(meta.capabilities.includes(token));
      const status = await peer.waitFor((m) => m.method === "status/changed", "status at start");
      assert.deepEqual(status.params, { status: "echo ready", level: "ok" });
      assert.ok(peer.rawLines.every((l) => !l.includes("jsonrpc")));
    }));

  test("an incompatible major is refused, an empty version is accepted", () =>
    withPeer(ECHO, async (peer) => {
      const bad = await peer.request("initialize", { protocol_version: "2.0" });
      assert.deepEqual(bad.error, { code: -32001, message: "host speaks YEP 2.0, incompatible with this server (1.0)" });
      const empty = await peer.request("initialize", {});
      assert.equal(empty.result.protocol_version, "1.0");
      const minor = await peer.request("initialize", { protocol_version: "1.7" });
      assert.equal(minor.result.name, "echo");
    }));

  test("ctx.update lines all precede the result", () =>
    withPeer(ECHO, async (peer) => {
      await peer.handshake();
      const res = await peer.request("tool/call", { name: "count", args: { n: 4, interval_ms: 5 } });
      assert.deepEqual(res.result, { counted: 4 });
      const at = peer.messages.indexOf(res);
      const updates = peer.messages
        .map((m, i) => [m, i])
        .filter(([m]) => m.method === "tool/update" && m.params.request_id === res.id);
      assert.deepEqual(updates.map(([m]) => m.params.output), ["1/4", "2/4", "3/4", "4/4"]);
      for (const [, i] of updates) assert.ok(i < at, "an update came after the result");
    }));

  test("echo, hooks, dynamic prompt, command, config and unknown names", () =>
    withPeer(ECHO, async (peer) => {
      await peer.handshake();
      assert.deepEqual((await peer.request("tool/call", { name: "echo", args: { text: "hi" } })).result, { echoed: "hi" });
      assert.deepEqual((await peer.request("tool/call", { name: "nope", args: {} })).error, { code: 0, message: "no such tool: nope" });
      const blocked = await peer.request("hook/fire", { event: "pre_tool_use", tool_name: "echo", args: { forbidden: true } });
      assert.deepEqual(blocked.result, { block: true, reason: "blocked by the echo example: args.forbidden is true", user_message: null });
      const allowed = await peer.request("hook/fire", { event: "pre_tool_use", tool_name: "echo", args: { text: "x" } });
      assert.deepEqual(allowed.result, { block: false, reason: "", user_message: null });
      assert.deepEqual((await peer.request("prompt/contribution")).result, { text: "echo dynamic prompt, turn 1" });
      assert.deepEqual((await peer.request("prompt/contribution")).result, { text: "echo dynamic prompt, turn 2" });
      assert.deepEqual((await peer.request("command/execute", { name: "ping", arguments: "" })).result, { success: true, message: "pong" });
      assert.deepEqual((await peer.request("command/execute", { name: "pong" })).error, { code: 0, message: "no such command: pong" });
      assert.deepEqual((await peer.request("config/changed", { config: {} })).result, { status: "restart-required" });
      assert.deepEqual((await peer.request("tool/call", "not an object")).error.code, -32602);
    }));

  test("an unknown method answers -32601; unknown notifications are ignored", () =>
    withPeer(ECHO, async (peer) => {
      await peer.handshake();
      peer.notify("something/new", { x: 1 });
      const res = await peer.request("frobnicate", { x: 1 });
      assert.deepEqual(res.error, { code: -32601, message: "method not supported by this host: frobnicate" });
      assert.equal((await peer.request("tool/call", { name: "echo", args: { text: "still here" } })).result.echoed, "still here");
    }));

  test("cancel mid-call answers cancelled:true and the call resolves cancelled, once", () =>
    withPeer(ECHO, async (peer) => {
      await peer.handshake();
      const id = peer.nextId++;
      peer.send({ id, method: "tool/call", params: { name: "count", args: { n: 100, interval_ms: 20 } } });
      await peer.waitFor((m) => m.method === "tool/update" && m.params.request_id === id, "a first update");
      const cancel = await peer.request("cancel", { id });
      assert.deepEqual(cancel.result, { cancelled: true });
      const call = await peer.waitFor((m) => m.id === id && !("method" in m), "the cancelled call");
      assert.deepEqual(call.error, { code: -32800, message: "cancelled" });
      assert.ok(peer.messages.indexOf(call) < peer.messages.indexOf(cancel), "the call resolves before the cancel answer");
      await delay(100);
      assert.equal(responsesTo(peer, id).length, 1, "exactly one answer");
      const after = peer.messages.slice(peer.messages.indexOf(call));
      assert.ok(!after.some((m) => m.method === "tool/update"), "no update after the cancel");
      assert.deepEqual((await peer.request("cancel", { id })).result, { cancelled: false });
      assert.deepEqual((await peer.request("cancel", { id: 999 })).result, { cancelled: false });
    }));

  test("ctx.ask round trip: a server request in its own id space", () =>
    withPeer(ECHO, async (peer) => {
      await peer.handshake();
      const asked = [];
      peer.onAsk = (msg) => {
        asked.push(msg);
        if (asked.length === 1) peer.send({ id: msg.id, result: { answer: "forty-two" } });
        else if (asked.length === 2) peer.send({ id: msg.id, result: { answer: "", cancelled: true } });
        else peer.send({ id: msg.id, result: { answer: "", cancelled: true, reason: "no UI here" } });
      };
      const first = await peer.request("tool/call", { name: "ask", args: { prompt: "Answer?" } });
      assert.deepEqual(first.result, { answer: "forty-two" });
      assert.deepEqual(asked[0].params, { prompt: "Answer?" });
      assert.equal(asked[0].id, 1, "the server's ids start at 1, apart from ours");
      const second = await peer.request("tool/call", { name: "ask", args: {} });
      assert.deepEqual(second.error, { code: 0, message: "the user dismissed the question" });
      assert.equal(asked[1].id, 2);
      // Cancelled by the host without asking anyone: the handler is told why.
      const third = await peer.request("tool/call", { name: "ask", args: {} });
      assert.deepEqual(third.error, { code: 0, message: "no UI here" });
    }));

  test("malformed and oversized lines are skipped with a note on stderr", () =>
    withPeer(ECHO, async (peer) => {
      await peer.handshake();
      peer.child.stdin.write("this is not json\n\n   \n[1,2]\n{\"id\":\"str\"}\n");
      peer.child.stdin.write(`{"id":77,"method":"tool/call","params":{"name":"echo","args":{"text":"${"x".repeat(4 * 1024 * 1024)}"}}}\n`);
      const res = await peer.request("tool/call", { name: "echo", args: { text: "after" } });
      assert.equal(res.result.echoed, "after");
      assert.equal(responsesTo(peer, 77).length, 0, "the oversized request was not run");
      assert.match(peer.stderr, /malformed wire line/);
      assert.match(peer.stderr, /frame cap/);
    }));

  test("EOF exits with code 0", () =>
    withPeer(ECHO, async (peer) => {
      await peer.handshake();
      const { code, signal } = await peer.close();
      assert.equal(signal, null);
      assert.equal(code, 0);
    }));

  test("EOF with a call in flight answers it cancelled after the grace, then exits 0", () =>
    withPeer(ECHO, async (peer) => {
      await peer.handshake();
      const id = peer.nextId++;
      peer.send({ id, method: "tool/call", params: { name: "count", args: { n: 1000, interval_ms: 50 } } });
      await peer.waitFor((m) => m.method === "tool/update" && m.params.request_id === id, "a first update");
      const started = Date.now();
      const { code } = await peer.close();
      assert.equal(code, 0);
      assert.ok(Date.now() - started < 4000);
      const answers = responsesTo(peer, id);
      assert.equal(answers.length, 1);
      assert.deepEqual(answers[0].error, { code: -32800, message: "cancelled" });
    }));
});

describe("fixture server over pipes", () => {
  test("concurrent calls really overlap", () =>
    withPeer(FIXTURE, async (peer) => {
      await peer.handshake();
      const calls = [1, 2, 3].map(() => peer.request("tool/call", { name: "barrier", args: { n: 3 } }));
      for (const res of await Promise.all(calls)) assert.deepEqual(res.result, { met: 3 });
    }));

  test("a stray console.log or stdout write in a handler never reaches stdout", () =>
    withPeer(FIXTURE, async (peer) => {
      await peer.handshake();
      const res = await peer.request("tool/call", { name: "noisy", args: {} });
      assert.deepEqual(res.result, { ok: true });
      await peer.close();
      for (const line of peer.rawLines) assert.doesNotThrow(() => JSON.parse(line), `not JSON on stdout: ${line}`);
      assert.ok(!peer.rawLines.some((l) => l.includes("stray")));
      for (const what of ["console.log", "console.info", "console.debug", "process.stdout.write"]) {
        assert.ok(peer.stderr.includes(`stray ${what}`), `${what} did not reach stderr`);
      }
    }));

  test("cancel aborts ctx.signal, suppresses updates and drops the late result", () =>
    withPeer(FIXTURE, async (peer) => {
      await peer.handshake();
      const id = peer.nextId++;
      peer.send({ id, method: "tool/call", params: { name: "wait", args: {} } });
      await delay(50);
      const cancel = await peer.request("cancel", { id });
      assert.deepEqual(cancel.result, { cancelled: true });
      const log = await peer.waitFor((m) => m.method === "log" && m.params.message.startsWith("aborted"), "the abort log");
      assert.deepEqual(log.params, { message: `aborted ${id} true`, level: "debug" });
      await delay(100);
      const answers = responsesTo(peer, id);
      assert.equal(answers.length, 1);
      assert.deepEqual(answers[0].error, { code: -32800, message: "cancelled" });
      assert.ok(!peer.messages.some((m) => m.method === "tool/update"));
    }));

  test("thrown errors: plain Error is code 0, YepError keeps its fields", () =>
    withPeer(FIXTURE, async (peer) => {
      await peer.handshake();
      assert.deepEqual((await peer.request("tool/call", { name: "fail", args: {} })).error, { code: 0, message: "plain failure" });
      assert.deepEqual((await peer.request("tool/call", { name: "fail", args: { typed: true } })).error, {
        code: 42,
        message: "typed failure",
        retryable: true,
        data: { why: "test" },
      });
    }));

  test("shutdown is answered after earlier trace events were handled", () =>
    withPeer(FIXTURE, async (peer) => {
      const init = await peer.handshake();
      assert.ok(init.result.capabilities.includes("trace"));
      assert.ok(init.result.capabilities.includes("hooks"));
      assert.ok(!init.result.capabilities.includes("prompt"));
      assert.equal(init.result.capability_params.prompt, undefined);
      for (const id of ["e1", "e2", "e3"]) peer.notify("trace/event", { event_type: "turn.started", id, ts: "", session_id: "s" });
      peer.notify("workspace/changed", { workspace_root: "/tmp/w" });
      const shutdown = await peer.request("shutdown");
      assert.deepEqual(shutdown.result, {});
      const logs = peer.messages.filter((m) => m.method === "log").map((m) => m.params.message);
      const handled = logs.filter((l) => l.startsWith("trace ") || l.startsWith("workspace "));
      assert.deepEqual(handled, ["trace e1", "trace e2", "trace e3", "workspace /tmp/w"]);
      const at = peer.messages.indexOf(shutdown);
      const lastTrace = peer.messages.findIndex((m) => m.method === "log" && m.params.message === "workspace /tmp/w");
      assert.ok(lastTrace < at);
      peer.notify("exit");
      assert.equal((await peer.exited).code, 0, "exit ends the process with stdin still open");
    }));

  test("onConfig gets the handshake config, then answers config/changed", () =>
    withPeer(FIXTURE, async (peer) => {
      await peer.request("initialize", { protocol_version: "1.0", config: { k: 1 } });
      peer.notify("initialized");
      const status = await peer.waitFor((m) => m.method === "status/changed", "status");
      assert.deepEqual(status.params, { status: "fixture ready", level: "warn", detail: "long form" });
      assert.deepEqual((await peer.request("config/changed", { config: { k: 2 } })).result, { status: "ok" });
      assert.deepEqual((await peer.request("config/changed", { config: { restart: true } })).result, { status: "restart-required" });
      const logs = peer.messages.filter((m) => m.method === "log").map((m) => m.params.message);
      assert.deepEqual(logs, ['config 2 {"k":2}', 'config 3 {"restart":true}']);
      const hook = await peer.request("hook/fire", { event: "pre_tool_use", tool_name: "rewrite", args: { path: "/etc" } });
      assert.deepEqual(hook.result, { block: false, reason: "", user_message: null, modified_args: { path: "/safe" } });
    }));
});

/** Typed tools: a JSON Schema, and a zod-like object that only offers `toJSONSchema()`. */
async function typedServer({ Server }) {
  const forecast = {
    type: "object",
    properties: {
      city: { type: "string", minLength: 1 },
      days: { type: "integer", minimum: 1, maximum: 7, default: 3 },
      units: { enum: ["metric", "imperial"], default: "metric" },
      near: { type: "array", items: { $ref: "#/$defs/place" }, maxItems: 2 },
      note: { anyOf: [{ type: "string", maxLength: 5 }, { type: "null" }] },
    },
    required: ["city"],
    additionalProperties: false,
    $defs: { place: { type: "object", properties: { lat: { type: "number" }, lon: { type: "number" } }, required: ["lat", "lon"] } },
  };
  const zodLike = {
    toJSONSchema: () => ({ $schema: "https://json-schema.org/draft/2020-12/schema", type: "object", properties: { q: { type: "string" } }, required: ["q"] }),
  };
  const standardLike = {
    "~standard": { version: 1, vendor: "test", jsonSchema: { input: ({ target }) => ({ type: "object", description: target }) } },
  };
  // A tree: `$ref: "#"` is the root itself (what zod-to-json-schema writes for recursion).
  const tree = { type: "object", properties: { name: { type: "string" }, kids: { type: "array", items: { $ref: "#" } } }, required: ["name"] };
  const odd = {
    type: "object",
    properties: { constructor: { type: "string", default: "made" }, point: { $ref: "#/properties/origin" }, origin: { type: "object", properties: { x: { type: "number" } }, required: ["x"] } },
    patternProperties: { "^x-": { type: "integer" } },
    additionalProperties: false,
    allOf: [{ properties: { level: { default: 1 } } }, { properties: { level: { type: "integer" } } }],
  };
  // A union in a recursive schema costs arms^depth to check in full.
  // Here two arms fail only after checking the whole subtree: 2^depth visits in full.
  const failsLate = { properties: { a: { $ref: "#" } }, additionalProperties: false };
  const deep = { anyOf: [failsLate, failsLate, { type: "object" }] };
  await new Server("typed")
    .tool("standard", { schema: standardLike }, () => "ok")
    .tool("tree", { schema: tree }, (args) => args)
    .tool("odd", { schema: odd }, (args) => args)
    .tool("deep", { schema: deep }, () => "must not run unchecked")
    .tool("forecast", { description: "The weather for a city", schema: forecast }, (args) => args)
    .tool("search", { description: "Search", schema: zodLike, outputSchema: { type: "object", properties: { hits: { type: "integer" } } } }, (args) => ({ hits: args.q.length }))
    .tool("raw", (args) => ({ raw: args }))
    .serve();
}

const TYPED = { args: ["--input-type=module", "-e", `(${typedServer})(await import(${JSON.stringify(SDK_URL)}));`] };

describe("typed tools", () => {
  test("the handshake carries each tool's schema, description and output schema", () =>
    withPeer(TYPED, async (peer) => {
      const tools = (await peer.handshake()).result.capability_params.tools;
      assert.deepEqual(tools.map((t) => t.name), ["standard", "tree", "odd", "deep", "forecast", "search", "raw"]);
      // A Standard JSON Schema is asked for draft 2020-12.
      assert.deepEqual(tools.shift(), { name: "standard", schema: { type: "object", description: "draft-2020-12" } });
      tools.splice(0, 3);
      assert.equal(tools[0].description, "The weather for a city");
      assert.deepEqual(tools[0].schema.required, ["city"]);
      assert.deepEqual(tools[0].schema.properties.days, { type: "integer", minimum: 1, maximum: 7, default: 3 });
      // toJSONSchema() is used, and the root's $schema dropped.
      assert.deepEqual(tools[1], {
        name: "search",
        description: "Search",
        schema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
        output_schema: { type: "object", properties: { hits: { type: "integer" } } },
      });
      assert.deepEqual(tools[2], { name: "raw" });
    }));

  test("arguments are checked, defaults filled in, and a bad one is named", () =>
    withPeer(TYPED, async (peer) => {
      await peer.handshake();
      const call = (name, args) => peer.request("tool/call", { name, args });
      const ok = await call("forecast", { city: "Oslo", near: [{ lat: 1, lon: 2.5 }], note: null });
      assert.deepEqual(ok.result, { city: "Oslo", days: 3, units: "metric", near: [{ lat: 1, lon: 2.5 }], note: null });
      const errors = [
        [{}, "missing field `city`"],
        [{ city: 3 }, "`city`: expected a string, got an integer"],
        [{ city: "" }, "`city`: must be at least 1 characters long"],
        [{ city: "a", days: 2.5 }, "`days`: expected an integer, got a number"],
        [{ city: "a", days: 9 }, "`days`: must be at most 7, got 9"],
        [{ city: "a", units: "kelvin" }, '`units`: expected one of ["metric","imperial"], got "kelvin"'],
        [{ city: "a", near: [{ lat: 1, lon: 2 }, { lat: 1 }] }, "`near[1]`: missing field `lon`"],
        [{ city: "a", near: [{ lat: "x", lon: 2 }] }, "`near[0].lat`: expected a number, got a string"],
        [{ city: "a", note: "too long" }, "`note`: must be at most 5 characters long"],
        [{ city: "a", colour: "red" }, "unknown field `colour`"],
        [["Oslo"], "expected an object, got an array"],
      ];
      for (const [args, message] of errors) {
        const res = await call("forecast", args);
        assert.equal(res.error?.code, -32602, JSON.stringify(res));
        assert.equal(res.error.message, `invalid arguments for \`forecast\`: ${message}`);
      }
      assert.deepEqual((await call("search", { q: "abc" })).result, { hits: 3 });
      assert.equal((await call("search", {})).error.message, "invalid arguments for `search`: missing field `q`");
      // `$ref: "#"` and a pointer below the root are followed.
      assert.deepEqual((await call("tree", { name: "a", kids: [{ name: "b", kids: [] }] })).result, { name: "a", kids: [{ name: "b", kids: [] }] });
      assert.equal((await call("tree", { name: "a", kids: [{ kids: [] }] })).error.message, "invalid arguments for `tree`: `kids[0]`: missing field `name`");
      // A property named like an Object method gets its default; allOf arms see the value as it
      // came; keys patternProperties may allow are not refused here.
      const odd = await call("odd", { point: { x: 1 }, "x-extra": 2 });
      assert.deepEqual(odd.result, { constructor: "made", point: { x: 1 }, "x-extra": 2, level: 1 });
      assert.equal((await call("odd", { point: {} })).error.message, "invalid arguments for `odd`: `point`: missing field `x`");
      // Past its budget the SDK stops checking and refuses the call, never passes it on
      // unchecked; it answers fast (the watchdog only catches a hang).
      let nested = {};
      for (let i = 0; i < 20; i++) nested = { a: nested, extra: i };
      const started = Date.now();
      const deep = await call("deep", nested);
      assert.equal(deep.error?.code, -32602, JSON.stringify(deep));
      assert.equal(deep.error.message, "invalid arguments for `deep`: the arguments are too large or complex to check within the SDK's budget of 10,000 schema visits");
      assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
      // The raw form gets the arguments as they came.
      assert.deepEqual((await call("raw", { any: [1, "x"] })).result, { raw: { any: [1, "x"] } });
    }));

  test("a schema that is neither JSON Schema nor offers toJSONSchema is refused at registration", () => {
    assert.throws(() => new sdk.Server("t").tool("x", { schema: "string" }, () => null), /JSON Schema object, or offer toJSONSchema\(\) or ~standard.jsonSchema/);
    assert.throws(() => new sdk.Server("t").tool("x", { schema: {} }), /handler must be a function/);
  });
});

/** A server served in this process over in-memory streams, for tests that watch what the
 * check does from inside (a spawned server's work cannot be observed). */
function inProcess(server) {
  const input = new PassThrough();
  const output = new PassThrough();
  const served = server.serve({ input, output });
  const waiting = new Map();
  let pending = "";
  let nextId = 1;
  output.setEncoding("utf8");
  output.on("data", (chunk) => {
    pending += chunk;
    let nl;
    while ((nl = pending.indexOf("\n")) !== -1) {
      const msg = JSON.parse(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
      waiting.get(msg.id)?.(msg);
    }
  });
  return {
    /** The line of a `tool/call` request, made before the call so its JSON is not counted. */
    line(name, args) {
      const id = nextId++;
      return { id, text: JSON.stringify({ id, method: "tool/call", params: { name, args } }) + "\n" };
    },
    /** Send a line made by `line()`; resolves with its response. */
    send({ id, text }) {
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        input.write(text);
      });
    },
    close() {
      input.end();
      return served;
    },
  };
}

const hostile = (name, file) => JSON.parse(readFileSync(join(repo, "tests", "fixtures", "hostile", name, file), "utf8"));

describe("hostile arguments (tests/fixtures/hostile)", () => {
  test("sdk-budget-overrun: an array too long for the check budget is refused, never passed through", async () => {
    const { schema, fill, count, last } = hostile("sdk-budget-overrun", "arguments.json");
    const values = [...Array(count).fill(fill), last];
    assert.equal(values.length, 10_002);
    let ran = 0;
    const server = inProcess(new sdk.Server("t").tool("counts", { schema }, () => ++ran));
    const res = await server.send(server.line("counts", { values }));
    assert.equal(ran, 0, "the handler ran with unchecked arguments");
    assert.equal(res.error?.code, -32602, JSON.stringify(res).slice(0, 300));
    assert.equal(res.error.message, "invalid arguments for `counts`: the arguments are too large or complex to check within the SDK's budget of 10,000 schema visits");
    // Within the budget every item is checked: the same `last` is found and named.
    const short = await server.send(server.line("counts", { values: [fill, fill, last] }));
    assert.equal(short.error?.message, "invalid arguments for `counts`: `values[2]`: must be at most 10, got 11");
    assert.equal((await server.send(server.line("counts", { values: [fill, 10] }))).result, 1);
    await server.close();
  });

  test("sdk-enum-megastring: a huge string against a long enum is refused without being serialized", async () => {
    const shape = hostile("sdk-enum-megastring", "shape.json");
    const members = Array.from({ length: shape.members }, (_, i) => `${shape.member_prefix}${i}`);
    const schema = { type: "object", properties: { pick: { enum: members } }, required: ["pick"] };
    const server = inProcess(new sdk.Server("t").tool("pick", { schema }, (args) => args.pick));
    // A member is found, the last one too (this also indexes the enum).
    assert.equal((await server.send(server.line("pick", { pick: members.at(-1) }))).result, members.at(-1));
    const mega = server.line("pick", { pick: shape.string_char.repeat(shape.string_chars) });
    // Deterministic stand-in for "fast": count what JSON.stringify writes while the call is
    // checked and answered. Comparing by JSON.stringify wrote the whole string once per
    // member (2 GB, ~3 s); the tripwire cuts that short at the first long write.
    const stringify = JSON.stringify;
    let longest = 0;
    JSON.stringify = function counted(...args) {
      const out = stringify.apply(this, args);
      const tripped = longest > 64 * 1024;
      longest = Math.max(longest, out?.length ?? 0);
      if (!tripped && longest > 64 * 1024) throw new Error(`tripwire: JSON.stringify wrote ${longest} characters`);
      return out;
    };
    let res;
    try {
      res = await server.send(mega);
    } finally {
      JSON.stringify = stringify;
    }
    assert.equal(res.error?.code, -32602, JSON.stringify(res).slice(0, 300));
    assert.ok(longest < 1024, `JSON.stringify wrote ${longest} characters`);
    // The error shows a bounded preview of the string and of the members.
    const { message } = res.error;
    assert.ok(message.length < 1024, `a ${message.length}-character error`);
    assert.match(message, /^invalid arguments for `pick`: `pick`: expected one of \["v0","v1",.*…\] \(2000 values\), got "x{80}"… \(1048576 characters\)$/);
    await server.close();
  });
});
