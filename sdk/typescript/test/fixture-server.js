// A test server for what the echo example does not exercise: overlap, stray output,
// cancellation seen from the handler, ordered trace handling, config, workspace.
import { setTimeout as sleep } from "node:timers/promises";
import { Server, YepError, modify } from "../yep-sdk.js";

let notifier = null;
let waiting = [];
let configs = 0;

await new Server("fixture")
  .tool("barrier", (args) =>
    // Resolves only once `n` calls are waiting at the same time: it proves calls overlap.
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
