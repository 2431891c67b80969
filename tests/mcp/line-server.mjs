// A minimal MCP server on stdio for measuring what a client accepts: it answers `initialize`,
// and every `tools/call` with one text block sized so that the whole reply line (newline
// included) is exactly the number of bytes given as the first argument.
import readline from "node:readline";

const target = Number(process.argv[2]);
const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const request = JSON.parse(line);
  if (request.method === "initialize") {
    send({ jsonrpc: "2.0", id: request.id, result: {
      protocolVersion: request.params.protocolVersion, capabilities: { tools: {} },
      serverInfo: { name: "line-server", version: "1.0.0" },
    } });
  } else if (request.method === "tools/call") {
    const reply = (text) => ({ jsonrpc: "2.0", id: request.id, result: { content: [{ type: "text", text }] } });
    const overhead = JSON.stringify(reply("")).length + 1;
    send(reply("x".repeat(target - overhead)));
  }
});
