// The bench's zot extension: one tool, `echo`, answering the `text` it is given, on the
// current zot generation (hello, hello_ack, registration, ready). Written here from the
// protocol reference.
"use strict";
const readline = require("readline");

const send = (frame) => process.stdout.write(JSON.stringify(frame) + "\n");
send({ type: "hello", name: "zot-echo", version: "0.1.0", capabilities: ["tool_cancel"] });

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const frame = JSON.parse(line);
  if (frame.type === "hello_ack") {
    send({
      type: "register_tool",
      name: "echo",
      description: "Repeat text back",
      schema: { type: "object", properties: { text: { type: "string" } } },
    });
    send({ type: "ready" });
  } else if (frame.type === "tool_call") {
    send({
      type: "tool_result",
      id: frame.id,
      content: [{ type: "text", text: (frame.args && frame.args.text) || "" }],
    });
  } else if (frame.type === "shutdown") {
    process.exit(0);
  }
});
