#!/usr/bin/env node
// The example capability server, as the Rust one (examples/echo/src/lib.rs):
//
// - `echo {text}` returns `{"echoed": text}`;
// - `count {n, interval_ms}` streams `i/n` updates, returns `{"counted": n}`, cancellable;
// - `ask {prompt}` returns `{"answer": …}` from the user (`ui/ask`);
// - a `pre_tool_use` hook blocks any call whose args carry `"forbidden": true`;
// - a static and a dynamic prompt, a `ping` command answering `pong`, a status push at start.
//
// Run it as a capability server: `node examples/echo-server.js` (the manifest is
// examples/echo/plugin.json with `capabilityServer.command` pointed here).

import { setTimeout as sleep } from "node:timers/promises";
import { Server, block } from "../yep-sdk.js";

let turns = 0;

export const server = new Server("echo", {
  instructions: "Use the echo tool to repeat text back; count streams progress.",
})
  .tool("echo", async (args) => {
    const text = typeof args?.text === "string" ? args.text : "";
    return { echoed: text };
  })
  .tool("count", async (args, ctx) => {
    const n = Number.isInteger(args?.n) && args.n >= 0 ? args.n : 3;
    const interval = Number.isInteger(args?.interval_ms) && args.interval_ms >= 0 ? args.interval_ms : 100;
    for (let i = 1; i <= n; i++) {
      try {
        await sleep(interval, undefined, { signal: ctx.signal });
      } catch {
        throw new Error("cancelled");
      }
      ctx.update(`${i}/${n}`);
    }
    return { counted: n };
  })
  .tool("ask", async (args, ctx) => {
    const prompt = typeof args?.prompt === "string" ? args.prompt : "What is your answer?";
    const answer = await ctx.ask(prompt);
    if (answer === null) throw new Error(ctx.askRefused ?? "the user dismissed the question");
    return { answer };
  })
  .onHook(async (fire) => {
    if (fire.event === "pre_tool_use" && fire.args?.forbidden === true) {
      return block("blocked by the echo example: args.forbidden is true");
    }
    return undefined;
  })
  .dynamicPrompt(async () => {
    turns += 1;
    return `echo dynamic prompt, turn ${turns}`;
  })
  .command("ping", async () => "pong")
  .onStart((notifier) => notifier.status("echo ready", "ok"));

await server.serve();
