// A zot extension in Node after zot's `clock` example, written here from the protocol
// reference: the older generation (hello and registrations before reading anything, never
// `ready`), commands only, dispatched by their exact registered spelling.
//
//   /now            -> display: the local time and the ISO time
//   /uptime [topic] -> prompt: a question about the uptime
//   any other name  -> noop with an error (another spelling included)
"use strict";
const readline = require("readline");

const started = Date.now();
const send = (frame) => process.stdout.write(JSON.stringify(frame) + "\n");

send({ type: "hello", name: "clock", version: "0.1.0", capabilities: ["commands"] });
send({ type: "register_command", name: "now", description: "show the time" });
send({ type: "register_command", name: "uptime", description: "ask about the uptime" });

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  let frame;
  try {
    frame = JSON.parse(line);
  } catch (e) {
    process.stderr.write(`clock: skipping a malformed line: ${e.message}\n`);
    return;
  }
  switch (frame.type) {
    case "hello_ack":
      process.stderr.write(
        `connected to zot ${frame.zot_version} (${frame.provider}/${frame.model})\n`
      );
      break;
    case "command_invoked": {
      const reply = { type: "command_response", id: frame.id };
      if (frame.name === "now") {
        const now = new Date();
        reply.action = "display";
        reply.display = `${now.toLocaleTimeString()} (${now.toISOString()})`;
      } else if (frame.name === "uptime") {
        const seconds = Math.round((Date.now() - started) / 1000);
        reply.action = "prompt";
        reply.prompt = `I have been up ${seconds}s. ${frame.args || "What should I do next?"}`;
      } else {
        reply.action = "noop";
        reply.error = `unknown command: ${frame.name}`;
      }
      send(reply);
      break;
    }
    case "shutdown":
      send({ type: "shutdown_ack" });
      process.exit(0);
      break;
    default:
      // A tool_call gets no reply (clock has no tools); other frames are logged.
      process.stderr.write(`clock: ignoring ${frame.type}\n`);
  }
});
lines.on("close", () => process.exit(0));
