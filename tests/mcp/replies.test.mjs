// Replies every client can read: what the official SDK's stdio client accepts (measured here),
// one budget for a tool call's whole reply, head and tail that read only what they return, and
// output that parses. Locally and through a capfs server.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { CAPFS, call, capfsLocal, capfsThroughCommand, capfsThroughServer, connect, startServer, tempDir } from "./lib.mjs";

const MiB = 1024 * 1024;
const LIMIT = 8 * MiB; // capfs mcp's largest reply line (docs/mcp.md)
const here = path.dirname(fileURLToPath(import.meta.url));

/** The bytes of the reply line that carried `result`, as the server wrote it (JSON.stringify
 *  writes what serde_json writes for these values, less whitespace neither adds). */
const lineBytes = (id, result) => Buffer.byteLength(JSON.stringify({ jsonrpc: "2.0", id, result })) + 1;

describe("the SDK's stdio client", () => {
  for (const [bytes, accepted] of [[10 * MiB - 4096, true], [10 * MiB + 4096, false]]) {
    test(`a reply line of ${bytes} bytes is ${accepted ? "read" : "refused, and the connection closed"}`, async () => {
      const { client, close } = await connect(process.execPath, [path.join(here, "line-server.mjs"), String(bytes)]);
      try {
        let closed = false;
        client.onclose = () => { closed = true; };
        const outcome = await client.callTool({ name: "x", arguments: {} }, undefined, { timeout: 20_000 })
          .then((r) => r.content[0].text.length, (e) => e);
        if (accepted) {
          assert.equal(typeof outcome, "number");
        } else {
          assert.ok(outcome instanceof Error, "the call fails");
          assert.ok(closed, "the client closed the connection");
        }
        console.log(`SDK stdio client: a ${bytes}-byte reply line ${accepted ? "read" : `refused (${outcome.message})`}`);
      } finally { await close(); }
    });
  }
});

function bigTree(label) {
  const ws = tempDir(label);
  const write = (name, size, byte) => fs.writeFileSync(path.join(ws, name), Buffer.alloc(size, byte));
  write("small.txt", 1024, 0x61);
  write("3m.txt", 3 * MiB, 0x61);
  write("5m.txt", 5 * MiB, 0x61);
  write("zeros-1m.bin", MiB, 0);
  write("64m.txt", 64 * MiB, 0x61);
  write("pic.png", 2 * MiB, 0x89);
  write("big.png", 4 * MiB, 0x89);
  // A 68 MiB log whose last two lines are short.
  const log = fs.openSync(path.join(ws, "app.log"), "w");
  const line = Buffer.from(`${"l".repeat(1023)}\n`);
  const block = Buffer.concat(Array(1024).fill(line));
  for (let i = 0; i < 68; i++) fs.writeSync(log, block);
  fs.writeSync(log, "second to last\nlast\n");
  fs.closeSync(log);
  fs.writeFileSync(path.join(ws, "head.log"), `first\nsecond\n${"h".repeat(8 * MiB)}\n`);
  return ws;
}

const BACKENDS = [
  ["local", (ws) => capfsLocal([ws], ["--read-limit", String(1024 * 1024 * 1024)])],
  ["--remote-command", (ws) => capfsThroughCommand([ws], [ws])],
  ["--remote ws://", (ws) => capfsThroughServer([ws], [ws])],
];

describe("one reply budget for a tool call", () => {
  for (const [label, start] of BACKENDS) {
    test(label, async () => {
      const ws = bigTree(`replies-${label.replace(/\W/g, "")}`);
      const p = (rel) => path.join(ws, rel);
      const { client, close } = await start(ws);
      const rows = [];
      try {
        let id = 1;
        const attempt = async (name, args, expect) => {
          const r = await call(client, name, args);
          id++;
          const bytes = lineBytes(id, r.result);
          rows.push(`${name} ${JSON.stringify(args).replaceAll(ws, "").slice(0, 60)}: ${r.isError ? "refused" : "answered"}, ${bytes} bytes`);
          assert.ok(bytes <= LIMIT, `${name}: ${bytes} bytes`);
          assert.equal(r.isError, expect === "refused", `${name} ${JSON.stringify(args)}: ${r.text.slice(0, 200)}`);
          return r;
        };
        await attempt("read_text_file", { path: p("small.txt") }, "answered");
        const three = await attempt("read_text_file", { path: p("3m.txt") }, "answered");
        assert.equal(three.text.length, 3 * MiB);
        for (const name of ["5m.txt", "64m.txt", "zeros-1m.bin"]) {
          const r = await attempt("read_text_file", { path: p(name) }, "refused");
          assert.match(r.text, new RegExp(`^${p(name)}: file is too large to read: a reply holds at most \\d+ bytes of text \\(8388608 bytes in all, the text sent twice\\); read part of it with head or tail$`));
        }
        // Four times the same file: the budget is shared, the files that do not fit say so.
        const many = await attempt("read_multiple_files", { paths: [p("3m.txt"), p("3m.txt"), p("3m.txt"), p("small.txt")] }, "answered");
        const parts = many.text.split("\n---\n");
        assert.equal(parts.length, 4);
        assert.ok(parts[0].startsWith(`${p("3m.txt")}:\naaa`));
        assert.match(parts[1], /Error - .*: file is too large to read: \d+ bytes of the reply were left for it/);
        assert.match(parts[2], /Error - /);
        assert.ok(parts[3].startsWith(`${p("small.txt")}:\naaa`), "a small file after them still fits");
        const pic = await attempt("read_media_file", { path: p("pic.png") }, "answered");
        assert.equal(Buffer.from(pic.result.content[0].data, "base64").length, 2 * MiB);
        const big = await attempt("read_media_file", { path: p("big.png") }, "refused");
        assert.match(big.text, new RegExp(`^${p("big.png")}: file is too large to read: a reply holds at most \\d+ bytes of a media file`));
        await attempt("read_media_file", { path: p("64m.txt") }, "refused");
        // head and tail of files far over the budget.
        const tail = await attempt("read_text_file", { path: p("app.log"), tail: 2 }, "answered");
        assert.equal(tail.text, "last\n");
        const tail3 = await attempt("read_text_file", { path: p("app.log"), tail: 3 }, "answered");
        assert.equal(tail3.text, "second to last\nlast\n");
        const head = await attempt("read_text_file", { path: p("head.log"), head: 2 }, "answered");
        assert.equal(head.text, "first\nsecond");
        await attempt("read_text_file", { path: p("head.log"), head: 3 }, "refused");
        await attempt("read_text_file", { path: p("app.log"), tail: 100_000 }, "refused");
        // The connection is still up after every refusal.
        assert.equal((await call(client, "read_text_file", { path: p("small.txt") })).text.length, 1024);
      } finally { await close(); }
      console.log(`reply sizes (${label}):\n  ${rows.join("\n  ")}`);
    });
  }
});

describe("head and tail read only what they return", () => {
  test("locally, past the read limit: tail reads from the end, head from the start", async () => {
    const ws = tempDir("tail-limit");
    fs.writeFileSync(path.join(ws, "log"), `${"x".repeat(100_000)}\nfirst\n${"y".repeat(100_000)}\nend one\nend two\n`);
    fs.writeFileSync(path.join(ws, "head"), `one\ntwo\n${"z".repeat(100_000)}\n`);
    const { client, close } = await capfsLocal([ws], ["--read-limit", "4096"]);
    try {
      const whole = await call(client, "read_text_file", { path: path.join(ws, "log") });
      assert.ok(whole.isError);
      assert.match(whole.text, /: file is too large to read: limit is 4096 bytes$/);
      assert.equal((await call(client, "read_text_file", { path: path.join(ws, "log"), tail: 2 })).text, "end two\n");
      assert.equal((await call(client, "read_text_file", { path: path.join(ws, "head"), head: 2 })).text, "one\ntwo");
      assert.ok((await call(client, "read_text_file", { path: path.join(ws, "log"), tail: 4 })).isError, "the third line from the end is over the limit");
    } finally { await close(); }
  });
});

test("through a server, head and tail read ranges: the server's audit log counts what was read", async () => {
  const ws = tempDir("range-audit");
  const log = fs.openSync(path.join(ws, "app.log"), "w");
  const block = Buffer.concat(Array(1024).fill(Buffer.from(`${"l".repeat(1023)}\n`)));
  for (let i = 0; i < 68; i++) fs.writeSync(log, block);
  fs.writeSync(log, "second to last\nlast\n");
  fs.closeSync(log);
  const audit = path.join(tempDir("range-audit-log"), "audit.jsonl");
  const server = await startServer([ws], ["--audit-log", audit]);
  const { client, close } = await connect(CAPFS, ["mcp", "--remote", server.url, ws]);
  try {
    assert.equal((await call(client, "read_text_file", { path: path.join(ws, "app.log"), tail: 2 })).text, "last\n");
    assert.equal((await call(client, "read_text_file", { path: path.join(ws, "app.log"), head: 2 })).text, `${"l".repeat(1023)}\n${"l".repeat(1023)}`);
  } finally { await close(); await server.stop(); }
  const records = fs.readFileSync(audit, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const reads = records.filter((r) => r.method.includes("read") || r.method.includes("Read"));
  assert.ok(reads.length > 0);
  assert.ok(reads.every((r) => r.method === "capfs/readFileRange"), JSON.stringify(reads.map((r) => r.method)));
  const bytes = reads.reduce((n, r) => n + r.bytes, 0);
  assert.ok(bytes <= 256 * 1024, `${bytes} bytes read of a 68 MiB file`);
});

describe("output that parses", () => {
  for (const [label, start] of BACKENDS) {
    test(label, async () => {
      const ws = tempDir(`output-${label.replace(/\W/g, "")}`);
      const p = (rel) => path.join(ws, rel);
      // 130 levels: deeper than the 128 the tree and the search list.
      let deep = ws;
      for (let i = 0; i < 130; i++) deep = path.join(deep, "d");
      fs.mkdirSync(deep, { recursive: true });
      fs.writeFileSync(p("data.bin"), Buffer.from([1, 2, 3]));
      fs.symlinkSync("data.bin", p("pic.png"));
      fs.writeFileSync(p("real.gif"), Buffer.from("GIF89a"));
      fs.symlinkSync("real.gif", p("blob.bin"));
      fs.writeFileSync(p("file.txt"), "x");
      const { client, close } = await start(ws);
      try {
        const tree = await call(client, "directory_tree", { path: ws });
        const blocks = tree.result.content.map((b) => b.text);
        assert.equal(blocks.length, 2, "the tree and its note");
        assert.equal(JSON.parse(blocks[0]).find((e) => e.name === "d").type, "directory");
        assert.match(blocks[1], /^\(results truncated: at most 100000 entries and 128 directory levels are listed\)$/);
        assert.deepEqual(tree.structured, { content: blocks[0] });
        const search = await call(client, "search_files", { path: ws, pattern: "**/d" });
        const lines = search.result.content[0].text.split("\n");
        assert.ok(lines.every((l) => l.startsWith(`${ws}/d`)), "every line of the first block is a path");
        assert.match(search.result.content[1].text, /^\(results truncated/);
        // The MIME type of the file a link leads to.
        const pic = await call(client, "read_media_file", { path: p("pic.png") });
        assert.equal(pic.result.content[0].type, "resource");
        assert.equal(pic.result.content[0].resource.mimeType, "application/octet-stream");
        const gif = await call(client, "read_media_file", { path: p("blob.bin") });
        assert.deepEqual(gif.result.content[0], { type: "image", data: "R0lGODlh", mimeType: "image/gif" });
        // Every error starts with the path it is about.
        const failing = [
          ["read_text_file", { path: p("missing.txt") }, p("missing.txt")],
          ["read_text_file", { path: p("missing.txt"), tail: 1 }, p("missing.txt")],
          ["read_text_file", { path: p("missing.txt"), head: 1 }, p("missing.txt")],
          ["read_media_file", { path: p("missing.png") }, p("missing.png")],
          ["edit_file", { path: p("missing.txt"), edits: [{ oldText: "a", newText: "b" }] }, p("missing.txt")],
          ["write_file", { path: p("no/such/dir.txt"), content: "x" }, p("no/such/dir.txt")],
          ["create_directory", { path: p("file.txt/sub") }, p("file.txt/sub")],
          ["list_directory", { path: p("file.txt") }, p("file.txt")],
          ["list_directory_with_sizes", { path: p("missing") }, p("missing")],
          ["directory_tree", { path: p("missing") }, p("missing")],
          ["search_files", { path: p("missing"), pattern: "*" }, p("missing")],
          ["get_file_info", { path: p("missing") }, p("missing")],
          ["move_file", { source: p("missing"), destination: p("moved") }, p("missing")],
        ];
        for (const [name, args, named] of failing) {
          const r = await call(client, name, args);
          assert.ok(r.isError, name);
          assert.ok(r.text.startsWith(`${named}: `), `${name}: ${r.text}`);
        }
      } finally { await close(); }
    });
  }

  test("the read limit's error names the path, through a server too", async () => {
    const ws = tempDir("limit-path");
    fs.writeFileSync(path.join(ws, "big.txt"), "x".repeat(100));
    const server = await startServer([ws], ["--read-limit", "64"]);
    const { client, close } = await connect(CAPFS, ["mcp", "--remote", server.url, ws]);
    try {
      for (const name of ["read_text_file", "read_media_file"]) {
        const r = await call(client, name, { path: path.join(ws, "big.txt") });
        assert.equal(r.text, `${path.join(ws, "big.txt")}: file is too large to read: limit is 64 bytes`, name);
      }
    } finally { await close(); await server.stop(); }
  });
});

describe("listings past the reply budget are cut, with a note, not refused", () => {
  // 22,000 files of 200-byte names in one directory: every listing of it passes 8 MiB.
  const ws = tempDir("cut-listings");
  const flat = path.join(ws, "flat");
  fs.mkdirSync(flat);
  const FILES = 22_000;
  for (let i = 0; i < FILES; i++) fs.writeFileSync(path.join(flat, `${String(i).padStart(5, "0")}${"n".repeat(195)}`), "");
  const NOTE = /^\(results truncated: (\d+) of the (\d+) entries found are left out to keep the reply within 8388608 bytes; .+\)$/;
  const countNodes = (nodes) => nodes.reduce((n, node) => n + 1 + countNodes(node.children ?? []), 0);
  for (const [label, start] of BACKENDS) {
    test(label, async () => {
      const { client, close } = await start(ws);
      try {
        let id = 1;
        const cut = async (name, args) => {
          const r = await call(client, name, args);
          id++;
          assert.ok(!r.isError, `${name}: ${r.text.slice(0, 300)}`);
          assert.ok(lineBytes(id, r.result) <= LIMIT, `${name}: ${lineBytes(id, r.result)} bytes`);
          const blocks = r.result.content.map((b) => b.text);
          assert.equal(blocks.length, 2, `${name}: the listing and its note`);
          assert.deepEqual(r.structured, { content: blocks[0] });
          const [, left, found] = blocks[1].match(NOTE) ?? assert.fail(`${name}: ${blocks[1]}`);
          assert.ok(Number(left) > 0 && Number(left) < Number(found), blocks[1]);
          return { text: blocks[0], shown: Number(found) - Number(left), found: Number(found) };
        };
        // The tree: JSON that parses, the first entries the walk found, as many as the note says.
        const tree = await cut("directory_tree", { path: ws });
        assert.equal(tree.found, FILES + 1);
        const nodes = JSON.parse(tree.text);
        assert.equal(countNodes(nodes), tree.shown);
        assert.equal(nodes[0].name, "flat");
        assert.ok(nodes[0].children.every((c) => c.type === "file" && /^\d{5}n{195}$/.test(c.name)));
        // An excluded part makes the rest fit: no note.
        const fits = await call(client, "directory_tree", { path: ws, excludePatterns: ["flat/0*"] });
        assert.equal(fits.result.content.length, 1);
        assert.equal(countNodes(JSON.parse(fits.text)), 1 + FILES - 10_000);
        // Searches and listings: whole lines, each a path or an entry.
        const search = await cut("search_files", { path: ws, pattern: "**" });
        assert.equal(search.found, FILES + 1);
        const paths = search.text.split("\n");
        assert.equal(paths.length, search.shown);
        assert.ok(paths.every((p) => p === flat || p.startsWith(`${flat}/`) && p.length === flat.length + 201));
        const list = await cut("list_directory", { path: flat });
        assert.equal(list.found, FILES);
        const lines = list.text.split("\n");
        assert.equal(lines.length, list.shown);
        assert.ok(lines.every((l) => /^\[FILE\] \d{5}n{195}$/.test(l)));
        const sizes = await cut("list_directory_with_sizes", { path: flat });
        const rows = sizes.text.split("\n");
        assert.deepEqual(rows.slice(-3), ["", `Total: ${FILES} files, 0 directories`, "Combined size: 0 B"]);
        assert.equal(rows.length - 3, sizes.shown);
      } finally { await close(); }
    });
  }
});
