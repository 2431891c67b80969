// The official SDK client drives every tool of capfs mcp on three backends: local roots, a
// capfs server over WebSocket, and a capfs server as --remote-command; and over both of the
// SDK's transports: stdio, and Streamable HTTP (capfs mcp --listen). Each result is checked
// for content, and the audit logs for one line per file system call.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { call, capfsHttp, capfsLocal, capfsRemoteCommand, connect, CAPFS, startServer, tempDir } from "./lib.mjs";

const TOOLS = [
  "read_file", "read_text_file", "read_media_file", "read_multiple_files", "write_file",
  "edit_file", "create_directory", "list_directory", "list_directory_with_sizes",
  "directory_tree", "move_file", "search_files", "get_file_info", "list_allowed_directories",
];

function populate(ws) {
  fs.writeFileSync(path.join(ws, "a.txt"), "one\ntwo\nthree\nfour\n");
  fs.writeFileSync(path.join(ws, "pic.png"), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  fs.writeFileSync(path.join(ws, "blob.bin"), Buffer.from([0, 1, 2, 3]));
  fs.mkdirSync(path.join(ws, "src/deep"), { recursive: true });
  fs.writeFileSync(path.join(ws, "src/main.rs"), "fn main() {\n    println!(\"hi\");\n}\n");
  fs.writeFileSync(path.join(ws, "src/deep/lib.rs"), "pub fn f() {}\n");
  fs.mkdirSync(path.join(ws, "node_modules/x"), { recursive: true });
  fs.writeFileSync(path.join(ws, "node_modules/x/index.rs"), "");
}

async function exerciseEveryTool(client, ws) {
  const p = (rel) => path.join(ws, rel);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), TOOLS);
  const write = tools.find((t) => t.name === "write_file").annotations;
  assert.deepEqual(write, { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false });

  let r = await call(client, "read_text_file", { path: p("a.txt") });
  assert.equal(r.text, "one\ntwo\nthree\nfour\n");
  assert.deepEqual(r.structured, { content: r.text });
  assert.equal((await call(client, "read_text_file", { path: p("a.txt"), head: 2 })).text, "one\ntwo");
  assert.equal((await call(client, "read_text_file", { path: p("a.txt"), tail: 2 })).text, "four\n");
  assert.equal((await call(client, "read_text_file", { path: "a.txt" })).text, "one\ntwo\nthree\nfour\n");
  r = await call(client, "read_text_file", { path: p("a.txt"), head: 1, tail: 1 });
  assert.ok(r.isError);
  assert.equal((await call(client, "read_file", { path: p("a.txt") })).text, "one\ntwo\nthree\nfour\n");

  r = await call(client, "read_media_file", { path: p("pic.png") });
  assert.deepEqual(r.result.content, [{ type: "image", data: "iVBORw==", mimeType: "image/png" }]);
  r = await call(client, "read_media_file", { path: p("blob.bin") });
  assert.equal(r.result.content[0].type, "resource");
  assert.equal(r.result.content[0].resource.blob, "AAECAw==");

  r = await call(client, "read_multiple_files", { paths: [p("a.txt"), p("missing.txt")] });
  assert.ok(!r.isError);
  assert.match(r.text, /a\.txt:\none\n/);
  assert.match(r.text, /missing\.txt: Error - /);

  r = await call(client, "write_file", { path: p("new.txt"), content: "alpha\n  beta\n" });
  assert.equal(r.text, `Successfully wrote to ${p("new.txt")}`);
  assert.equal(fs.readFileSync(p("new.txt"), "utf8"), "alpha\n  beta\n");

  r = await call(client, "edit_file", { path: p("new.txt"), edits: [{ oldText: "beta", newText: "gamma" }], dryRun: true });
  assert.match(r.text, /^```diff\nIndex: .*new\.txt\n=+\n--- .*\toriginal\n\+\+\+ .*\tmodified\n@@ -1,2 \+1,2 @@\n alpha\n-  beta\n\+  gamma\n```\n\n$/);
  assert.equal(fs.readFileSync(p("new.txt"), "utf8"), "alpha\n  beta\n");
  r = await call(client, "edit_file", { path: p("new.txt"), edits: [{ oldText: "alpha\nbeta", newText: "ALPHA\nBETA" }] });
  assert.ok(!r.isError, r.text);
  assert.equal(fs.readFileSync(p("new.txt"), "utf8"), "ALPHA\nBETA\n");
  r = await call(client, "edit_file", { path: p("new.txt"), edits: [{ oldText: "nowhere", newText: "x" }] });
  assert.ok(r.isError);
  assert.match(r.text, /Could not find exact match for edit:\nnowhere/);

  r = await call(client, "create_directory", { path: p("made/a/b") });
  assert.equal(r.text, `Successfully created directory ${p("made/a/b")}`);
  assert.ok(fs.statSync(p("made/a/b")).isDirectory());

  r = await call(client, "list_directory", { path: p("src") });
  assert.deepEqual(r.text.split("\n").sort(), ["[DIR] deep", "[FILE] main.rs"]);

  r = await call(client, "list_directory_with_sizes", { path: ws, sortBy: "size" });
  assert.match(r.text, /^\[FILE\] a\.txt {32}19 B$/m);
  assert.match(r.text, /\nTotal: 4 files, 3 directories\nCombined size: /);

  r = await call(client, "directory_tree", { path: p("src") });
  const tree = JSON.parse(r.text);
  assert.deepEqual(tree.find((e) => e.name === "deep"), { name: "deep", type: "directory", children: [{ name: "lib.rs", type: "file" }] });
  r = await call(client, "directory_tree", { path: ws, excludePatterns: ["node_modules"] });
  assert.ok(!JSON.parse(r.text).some((e) => e.name === "node_modules"));

  r = await call(client, "move_file", { source: p("new.txt"), destination: p("made/moved.txt") });
  assert.equal(r.text, `Successfully moved ${p("new.txt")} to ${p("made/moved.txt")}`);
  assert.ok(fs.existsSync(p("made/moved.txt")) && !fs.existsSync(p("new.txt")));
  r = await call(client, "move_file", { source: p("a.txt"), destination: p("made/moved.txt") });
  assert.ok(r.isError, "a move onto an existing file fails");

  r = await call(client, "search_files", { path: ws, pattern: "**/*.rs", excludePatterns: ["node_modules/**", "node_modules"] });
  assert.deepEqual(r.text.split("\n").sort(), [p("src/deep/lib.rs"), p("src/main.rs")]);
  assert.equal((await call(client, "search_files", { path: ws, pattern: "*.zzz" })).text, "No matches found");

  r = await call(client, "get_file_info", { path: p("a.txt") });
  const date = String.raw`\w{3} \w{3} \d\d \d{4} [\d:]{8} GMT\+0000 \(Coordinated Universal Time\)`;
  assert.match(r.text, new RegExp(`^size: 19\ncreated: ${date}\nmodified: ${date}\naccessed: ${date}\nisDirectory: false\nisFile: true\npermissions: \\d{3}$`));

  r = await call(client, "list_allowed_directories");
  assert.match(r.text, new RegExp(`^Allowed directories:\\n${ws}`));

  r = await call(client, "read_text_file", { path: "/etc/passwd" });
  assert.ok(r.isError);
  assert.match(r.text, /Access denied - path outside allowed directories/);
}

describe("every tool through the SDK client", () => {
  // The transports the SDK client reaches capfs mcp through, each on local roots.
  for (const [label, start] of [["local roots", capfsLocal], ["local roots over Streamable HTTP (--listen)", capfsHttp]]) {
    test(label, async () => {
      const ws = tempDir("local");
      populate(ws);
      const { client, close } = await start([ws]);
      try { await exerciseEveryTool(client, ws); } finally { await close(); }
    });
  }

  test("a capfs server as --remote-command", async () => {
    const ws = tempDir("remote-command");
    populate(ws);
    const { client, close } = await capfsRemoteCommand([ws]);
    try { await exerciseEveryTool(client, ws); } finally { await close(); }
  });

  test("a capfs server over WebSocket (--remote), every call in its audit log", async () => {
    const ws = tempDir("remote");
    populate(ws);
    const log = path.join(tempDir("audit"), "audit.jsonl");
    const server = await startServer([ws], ["--audit-log", log]);
    const { client, close } = await connect(CAPFS, ["mcp", "--remote", server.url, ws]);
    try {
      await exerciseEveryTool(client, ws);
      // One more call whose file system call must show up as a line.
      await call(client, "get_file_info", { path: path.join(ws, "src") });
    } finally { await close(); await server.stop(); }
    const records = fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    const methods = new Set(records.map((r) => r.method));
    // Reads travel as data-frame streams between capfs peers.
    for (const m of ["capfs/readFileStream", "fs/writeFile", "fs/createDirectory", "fs/getMetadata", "fs/readDirectory", "fs/rename", "capfs/walk"]) {
      assert.ok(methods.has(m), `the server's audit log has ${m}: ${[...methods]}`);
    }
    assert.ok(records.some((r) => r.method === "fs/getMetadata" && r.paths[0] === path.join(ws, "src")));
  });
});

test("without directories, --remote serves the server's announced roots with their access", async () => {
  const ws = tempDir("announced");
  const ro = tempDir("announced-ro");
  fs.writeFileSync(path.join(ro, "keep.txt"), "keep\n");
  const server = await startServer([ws], ["--read-only", ro]);
  const { client, close } = await connect(CAPFS, ["mcp", "--remote", server.url]);
  try {
    const listed = await call(client, "list_allowed_directories");
    assert.deepEqual(listed.result.content.map((b) => b.text), [`Allowed directories:\n${ws}\n${ro}`, `Read-only (write_file, edit_file, create_directory and move_file refuse them):\n${ro}`]);
    assert.deepEqual(listed.structured, { content: `Allowed directories:\n${ws}\n${ro}` });
    const r = await call(client, "write_file", { path: path.join(ro, "keep.txt"), content: "changed" });
    assert.ok(r.isError);
    assert.match(r.text, /is read-only/);
    assert.ok(!(await call(client, "write_file", { path: path.join(ws, "ok.txt"), content: "ok" })).isError);
  } finally { await close(); await server.stop(); }
  assert.equal(fs.readFileSync(path.join(ro, "keep.txt"), "utf8"), "keep\n");
  assert.equal(fs.readFileSync(path.join(ws, "ok.txt"), "utf8"), "ok");
});

describe("local behaviour", () => {
  test("--audit-log writes one line per file system call, as serve does", async () => {
    const ws = tempDir("audit-local");
    populate(ws);
    const log = path.join(tempDir("audit-local-log"), "audit.jsonl");
    const { client, close } = await capfsLocal([ws], ["--audit-log", log]);
    try {
      await call(client, "read_text_file", { path: path.join(ws, "a.txt") });
      await call(client, "write_file", { path: path.join(ws, "w.txt"), content: "x" });
      await call(client, "search_files", { path: ws, pattern: "**/*.rs" });
    } finally { await close(); }
    const records = fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    // A read looks at the size first, then streams at most what the reply can carry.
    assert.deepEqual(records.map((r) => r.method), ["fs/getMetadata", "capfs/readFileStream", "fs/writeFile", "capfs/walk"]);
    assert.equal(records[1].bytes, 19);
    assert.deepEqual(records[2].paths, [path.join(ws, "w.txt")]);
    assert.equal(records[2].bytes, 1);
  });

  test("reads obey the read limit with a message naming it; a FIFO is refused, not waited on", async () => {
    const ws = tempDir("limit");
    fs.writeFileSync(path.join(ws, "big.txt"), "x".repeat(100));
    fs.writeFileSync(path.join(ws, "small.txt"), "ok");
    execFileSync("mkfifo", [path.join(ws, "fifo")]);
    const { client, close } = await capfsLocal([ws], ["--read-limit", "64"]);
    try {
      for (const name of ["read_text_file", "read_media_file"]) {
        const r = await call(client, name, { path: path.join(ws, "big.txt") });
        assert.ok(r.isError, name);
        assert.match(r.text, /too large to read: limit is 64 bytes/);
      }
      const many = await call(client, "read_multiple_files", { paths: [path.join(ws, "big.txt"), path.join(ws, "small.txt")] });
      assert.match(many.text, /big\.txt: Error - .*limit is 64 bytes/);
      assert.match(many.text, /small\.txt:\nok\n/);
      for (const name of ["read_text_file", "read_media_file"]) {
        const r = await call(client, name, { path: path.join(ws, "fifo") });
        assert.ok(r.isError, `${name} on a FIFO fails at once`);
        assert.match(r.text, /not a regular file/);
      }
    } finally { await close(); }
  });

  test("read-only roots refuse every mutating tool and are marked", async () => {
    const rw = tempDir("rw");
    const ro = tempDir("ro");
    fs.writeFileSync(path.join(ro, "keep.txt"), "keep\n");
    const { client, close } = await capfsLocal([rw], ["--read-only", ro]);
    try {
      // The first block is the reference's (every line after the first a path); the second
      // says which are read-only.
      const listed = (await call(client, "list_allowed_directories")).result.content.map((b) => b.text);
      assert.deepEqual(listed, [`Allowed directories:\n${rw}\n${ro}`, `Read-only (write_file, edit_file, create_directory and move_file refuse them):\n${ro}`]);
      const k = path.join(ro, "keep.txt");
      const attempts = [
        ["write_file", { path: k, content: "changed" }],
        ["write_file", { path: path.join(ro, "new.txt"), content: "x" }],
        ["edit_file", { path: k, edits: [{ oldText: "keep", newText: "gone" }] }],
        ["create_directory", { path: path.join(ro, "d") }],
        ["move_file", { source: k, destination: path.join(ro, "k2.txt") }],
        ["move_file", { source: k, destination: path.join(rw, "k2.txt") }],
      ];
      for (const [name, args] of attempts) {
        const r = await call(client, name, args);
        assert.ok(r.isError, `${name} is refused`);
        assert.match(r.text, /is read-only/);
      }
      assert.equal((await call(client, "read_text_file", { path: k })).text, "keep\n");
      const dry = await call(client, "edit_file", { path: k, edits: [{ oldText: "keep", newText: "gone" }], dryRun: true });
      assert.ok(!dry.isError, "a dry run only reads");
    } finally { await close(); }
    assert.deepEqual(fs.readdirSync(ro), ["keep.txt"]);
    assert.equal(fs.readFileSync(path.join(ro, "keep.txt"), "utf8"), "keep\n");
  });

  test("client roots narrow the configured roots, never widen them, and follow list_changed", async () => {
    const ws = tempDir("roots");
    fs.mkdirSync(path.join(ws, "a"));
    fs.mkdirSync(path.join(ws, "b"));
    const elsewhere = tempDir("roots-elsewhere");
    const roots = { current: [{ uri: `file://${path.join(ws, "a")}` }, { uri: `file://${elsewhere}` }, { uri: "b" }] };
    const { client, close, stderr } = await capfsLocal([ws], [], { roots });
    try {
      const expectAllowed = async (text) => {
        // The server asks for roots after `initialized`; wait (bounded) until it has them.
        for (let i = 0; i < 200; i++) {
          if ((await call(client, "list_allowed_directories")).text === text) return;
          await new Promise((r) => setImmediate(r));
        }
        assert.equal((await call(client, "list_allowed_directories")).text, text);
      };
      await expectAllowed(`Allowed directories:\n${path.join(ws, "a")}`);
      assert.ok((await call(client, "list_directory", { path: path.join(ws, "b") })).isError);
      assert.ok((await call(client, "list_directory", { path: elsewhere })).isError);
      assert.match(stderr(), /ignoring a client root outside every configured root/);
      assert.match(stderr(), /ignoring a client root: neither a file:\/\/ URI nor an absolute path/);
      // A plain absolute path is a root as a file:// URI is.
      roots.current = [{ uri: path.join(ws, "b") }];
      await client.sendRootsListChanged();
      await expectAllowed(`Allowed directories:\n${path.join(ws, "b")}`);
      assert.ok(!(await call(client, "list_directory", { path: path.join(ws, "b") })).isError);
    } finally { await close(); }
  });
});
