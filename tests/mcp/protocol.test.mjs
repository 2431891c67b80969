// Every request gets an answer: lone surrogates (which JSON.stringify writes) are replaced by
// U+FFFD as the reference ends up storing them, a line over the 16 MiB bound is answered with
// an error carrying its id, input that is not a request is answered with a JSON-RPC 2.0 error
// (`"id": null` when its id cannot be read), and the connection goes on.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { describe, test } from "node:test";
import { CAPFS, call, capfsLocal, reference, tempDir } from "./lib.mjs";

const MiB = 1024 * 1024;

describe("lone surrogates", () => {
  test("a write_file with one is answered, and stores U+FFFD as the reference does", async () => {
    const stored = {};
    for (const [label, start] of [["capfs", capfsLocal], ["reference", reference]]) {
      const ws = tempDir(`surrogate-${label}`);
      const { client, close } = await start([ws]);
      try {
        const r = await client.callTool(
          { name: "write_file", arguments: { path: path.join(ws, "s.txt"), content: "a\ud800b\udc00c" } },
          undefined, { timeout: 10_000 },
        );
        assert.ok(!r.isError, JSON.stringify(r));
        const read = await call(client, "read_text_file", { path: path.join(ws, "s.txt") });
        assert.equal(read.text, "a\ufffdb\ufffdc");
      } finally { await close(); }
      stored[label] = fs.readFileSync(path.join(ws, "s.txt")).toString("hex");
    }
    assert.equal(stored.capfs, stored.reference);
  });
});

test("a request line over 16 MiB gets an error with its id, and the connection goes on", async () => {
  const ws = tempDir("oversized");
  const { client, close } = await capfsLocal([ws]);
  try {
    const started = Date.now();
    const failure = await client.callTool(
      { name: "write_file", arguments: { path: path.join(ws, "big.txt"), content: "x".repeat(17 * MiB) } },
      undefined, { timeout: 30_000 },
    ).then(() => null, (e) => e);
    assert.ok(failure, "the call fails");
    assert.match(failure.message, /request refused: its line holds \d+ bytes, more than the 16777200 bytes capfs mcp reads in one message/);
    assert.ok(Date.now() - started < 30_000, "answered, not timed out");
    assert.ok(!fs.existsSync(path.join(ws, "big.txt")));
    // 15 MiB still fits.
    const ok = await client.callTool(
      { name: "write_file", arguments: { path: path.join(ws, "ok.txt"), content: "y".repeat(15 * MiB) } },
      undefined, { timeout: 30_000 },
    );
    assert.ok(!ok.isError);
    assert.equal(fs.statSync(path.join(ws, "ok.txt")).size, 15 * MiB);
  } finally { await close(); }
});

/** capfs mcp spoken to line by line; returns { send, next, close }. */
async function raw(ws) {
  const child = spawn(CAPFS, ["mcp", ws], { stdio: ["pipe", "pipe", "ignore"] });
  const lines = readline.createInterface({ input: child.stdout });
  const queue = [];
  const waiting = [];
  lines.on("line", (l) => { const w = waiting.shift(); if (w) w(l); else queue.push(l); });
  const send = (text) => child.stdin.write(`${text}\n`);
  const next = () => new Promise((resolve, reject) => {
    if (queue.length) return resolve(JSON.parse(queue.shift()));
    const timer = setTimeout(() => reject(new Error("no reply within 10 s")), 10_000);
    waiting.push((l) => { clearTimeout(timer); resolve(JSON.parse(l)); });
  });
  const close = () => new Promise((resolve) => { child.once("exit", resolve); child.stdin.end(); });
  send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }));
  assert.equal((await next()).id, 1);
  send(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
  return { send, next, close };
}

test("input that is not a request is answered as JSON-RPC 2.0 requires", async () => {
  const ws = tempDir("raw");
  const { send, next, close } = await raw(ws);
  try {
    const cases = [
      ["not JSON", "{this is not json", -32700],
      ["JSON, not a request", JSON.stringify({ jsonrpc: "2.0", id: 7, method: 5 }), -32600],
      ["an oversized line whose id cannot be read", `[${"1,".repeat(9 * MiB)}1]`, -32600],
    ];
    for (const [label, line, code] of cases) {
      send(line);
      const reply = await next();
      assert.equal(reply.jsonrpc, "2.0", label);
      assert.ok("id" in reply, `${label}: the reply has an id member`);
      assert.equal(reply.id, null, label);
      assert.equal(reply.error.code, code, label);
    }
    // An oversized request whose id comes first.
    send(`{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"write_file","arguments":{"path":"${ws}/x","content":"${"z".repeat(17 * MiB)}"}}}`);
    const reply = await next();
    assert.equal(reply.id, "first");
    assert.equal(reply.error.code, -32600);
    send(JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }));
    const list = await next();
    assert.equal(list.id, 9);
    assert.equal(list.result.tools.length, 14);
  } finally { await close(); }
});
