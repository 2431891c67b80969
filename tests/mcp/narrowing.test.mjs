// Narrowing on handles: a configured directory inside a server's wider root, and every client
// root, is a root of its own, so a link that leads out of it is refused even where it stays
// inside the wider root. Locally, through --remote-command and through --remote ws://, with an
// outside tree (`private`, beside the configured directory) compared byte for byte. Then the
// roots/list_changed sequences: roots only ever narrow the configured directories.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import {
  awaitAllowed, call, capfsLocal, capfsThroughCommand, capfsThroughServer, snapshot, tempDir,
} from "./lib.mjs";

const SECRET = "PRIVATE-KEY";

/** srv/{ws, private}: ws/link -> ../private (out of ws, inside srv), ws/sub/up -> .. (out of
 *  ws/sub, inside ws), ws/sub/abs -> <srv>/private (absolute, out of ws). */
function layout(label) {
  const srv = tempDir(label);
  const ws = path.join(srv, "ws");
  const priv = path.join(srv, "private");
  fs.mkdirSync(path.join(ws, "sub"), { recursive: true });
  fs.mkdirSync(priv);
  fs.writeFileSync(path.join(priv, "key.txt"), `${SECRET}\n`);
  fs.writeFileSync(path.join(ws, "top.txt"), "top of ws\n");
  fs.writeFileSync(path.join(ws, "sub", "mine.txt"), "mine\n");
  fs.symlinkSync("../private", path.join(ws, "link"));
  fs.symlinkSync("..", path.join(ws, "sub", "up"));
  fs.symlinkSync(priv, path.join(ws, "sub", "abs"));
  return { srv, ws, priv, sub: path.join(ws, "sub") };
}

/** Every tool that names a path, through a link out of `dir`; returns what leaked. */
async function escapesThrough(client, dir, link, file, secret) {
  const p = (rel) => path.join(dir, link, rel);
  const attempts = [
    ["read_text_file", { path: p(file) }],
    ["read_text_file", { path: p(file), tail: 1 }],
    ["read_text_file", { path: p(file), head: 1 }],
    ["read_media_file", { path: p(file) }],
    ["read_multiple_files", { paths: [p(file)] }],
    ["write_file", { path: p("planted.txt"), content: "PLANTED" }],
    ["write_file", { path: p(file), content: "REPLACED" }],
    ["edit_file", { path: p(file), edits: [{ oldText: secret.slice(0, 3), newText: "CHANGED" }] }],
    ["create_directory", { path: p("made") }],
    ["list_directory", { path: p(".") }],
    ["list_directory_with_sizes", { path: p(".") }],
    ["directory_tree", { path: p(".") }],
    ["search_files", { path: p("."), pattern: "**" }],
    ["get_file_info", { path: p(file) }],
    ["move_file", { source: p(file), destination: path.join(dir, "pulled.txt") }],
  ];
  const leaked = [];
  for (const [name, args] of attempts) {
    const r = await call(client, name, args);
    const body = JSON.stringify(r.result);
    // read_multiple_files reports each file's error in its text, not as a failed call.
    const refused = r.isError || (name === "read_multiple_files" && r.text.includes(": Error - "));
    if (!refused || body.includes(secret) || body.includes(Buffer.from(secret).toString("base64").slice(0, 12))) leaked.push(`${name} ${JSON.stringify(args)}: ${r.text.slice(0, 120)}`);
  }
  return leaked;
}

const BACKENDS = [
  ["local", (l, dirs, o) => capfsLocal(dirs, [], o)],
  ["--remote-command, server root wider", (l, dirs, o) => capfsThroughCommand([l.srv], dirs, o)],
  ["--remote ws://, server root wider", (l, dirs, o) => capfsThroughServer([l.srv], dirs, o)],
];

describe("a configured directory is a root of its own", () => {
  for (const [label, start] of BACKENDS) {
    test(label, async () => {
      const l = layout("narrow-conf");
      const before = snapshot(l.priv);
      const { client, close } = await start(l, [l.ws]);
      let leaked, inside;
      try {
        leaked = await escapesThrough(client, l.ws, "link", "key.txt", SECRET);
        leaked.push(...await escapesThrough(client, l.ws, "sub/abs", "key.txt", SECRET));
        inside = await call(client, "read_text_file", { path: path.join(l.ws, "sub/up/top.txt") });
      } finally { await close(); }
      assert.deepEqual(leaked, [], "nothing outside the configured directory is reached");
      assert.deepEqual(snapshot(l.priv), before, "the tree beside it is byte-identical");
      assert.equal(inside.text, "top of ws\n", "a link that stays inside still works");
    });
  }
});

describe("a client root is a root of its own", () => {
  for (const [label, start] of BACKENDS) {
    test(label, async () => {
      const l = layout("narrow-client");
      const before = snapshot(l.ws);
      const roots = { current: [{ uri: `file://${l.sub}` }] };
      const { client, close } = await start(l, [l.ws], { roots });
      let leaked, mine;
      try {
        assert.equal(await awaitAllowed(client, `Allowed directories:\n${l.sub}`), `Allowed directories:\n${l.sub}`);
        // sub/up leads to ws: inside the configured directory, outside the client's root.
        leaked = await escapesThrough(client, l.sub, "up", "top.txt", "top of ws");
        mine = await call(client, "read_text_file", { path: path.join(l.sub, "mine.txt") });
      } finally { await close(); }
      assert.deepEqual(leaked, [], "nothing outside the client's root is reached");
      const after = snapshot(l.ws);
      assert.deepEqual(after, before, "the configured directory is byte-identical");
      assert.equal(mine.text, "mine\n");
    });
  }
});

describe("configured directories are resolved once, any spelling works", () => {
  test("local: a directory given through a symlink, and named twice", async () => {
    const l = layout("spelling");
    const alias = path.join(l.srv, "wslink");
    fs.symlinkSync(l.ws, alias);
    const { client, close } = await capfsLocal([alias, `${l.ws}/`, l.ws]);
    try {
      assert.equal((await call(client, "list_allowed_directories")).text, `Allowed directories:\n${l.ws}`);
      for (const spelling of [alias, l.ws, `${l.ws}/./sub/..`]) {
        const r = await call(client, "read_text_file", { path: path.join(spelling, "top.txt") });
        assert.equal(r.text, "top of ws\n", spelling);
      }
      assert.ok(!(await call(client, "write_file", { path: path.join(alias, "w.txt"), content: "w" })).isError);
    } finally { await close(); }
    assert.equal(fs.readFileSync(path.join(l.ws, "w.txt"), "utf8"), "w");
  });

  for (const [label, startOn] of [
    ["--remote-command", (roots, dirs) => capfsThroughCommand(roots, dirs)],
    ["--remote ws://", (roots, dirs) => capfsThroughServer(roots, dirs)],
  ]) {
    test(`${label}: the server's root given through a symlink, mcp given the same spelling`, async () => {
      const l = layout("spelling-remote");
      const alias = path.join(l.srv, "wslink");
      fs.symlinkSync(l.ws, alias);
      // The server is started on the spelling; it serves the directory under its real path.
      const { client, close } = await startOn([alias], [alias]);
      try {
        for (const spelling of [alias, l.ws]) {
          const r = await call(client, "read_text_file", { path: path.join(spelling, "top.txt") });
          assert.equal(r.text, "top of ws\n", spelling);
        }
      } finally { await close(); }
    });
  }
});

describe("roots/list_changed sequences only ever narrow", () => {
  for (const [label, start] of BACKENDS) {
    test(label, async () => {
      const l = layout("roots-seq");
      const a = path.join(l.ws, "a");
      const b = path.join(l.ws, "b");
      fs.mkdirSync(a);
      fs.mkdirSync(b);
      fs.writeFileSync(path.join(a, "f.txt"), "in a\n");
      fs.writeFileSync(path.join(b, "f.txt"), "in b\n");
      const roots = { current: [{ uri: `file://${a}` }] };
      const { client, close } = await start(l, [l.ws], { roots });
      const read = async (dir) => call(client, "read_text_file", { path: path.join(dir, "f.txt") });
      const change = async (uris, expected) => {
        roots.current = uris.map((uri) => ({ uri }));
        await client.sendRootsListChanged();
        assert.equal(await awaitAllowed(client, `Allowed directories:\n${expected.join("\n")}`), `Allowed directories:\n${expected.join("\n")}`, JSON.stringify(uris));
      };
      try {
        assert.equal(await awaitAllowed(client, `Allowed directories:\n${a}`), `Allowed directories:\n${a}`);
        assert.ok((await read(b)).isError);
        // No root: nothing at all, and every call says why.
        await change([], []);
        for (const dir of [a, b, l.ws]) {
          const r = await read(dir);
          assert.ok(r.isError, dir);
          assert.match(r.text, /no allowed directories: the client's roots \(none\) lie outside the configured directories/);
        }
        const w = await call(client, "write_file", { path: path.join(l.ws, "planted.txt"), content: "x" });
        assert.ok(w.isError);
        // Only roots capfs cannot serve: nothing either.
        await change([`file://${l.priv}`, "file://elsewhere/x", `file://${l.ws}-sibling`], []);
        assert.ok((await read(a)).isError);
        // file://localhost/ names a local path.
        await change([`file://localhost${b}`], [b]);
        assert.equal((await read(b)).text, "in b\n");
        assert.ok((await read(a)).isError);
        // A plain absolute path names a local path too, as the reference takes it; inside the
        // configured directory only, any spelling of it.
        await change([a], [a]);
        assert.equal((await read(a)).text, "in a\n");
        assert.ok((await read(b)).isError);
        await change([`${b}/`, `${l.ws}/sub/../a`, l.priv, l.srv, `${l.ws}-sibling`], [b, a]);
        assert.equal((await read(b)).text, "in b\n");
        assert.ok((await call(client, "read_text_file", { path: path.join(l.priv, "key.txt") })).isError);
        // Relative paths, `~` and other schemes name nothing: no directory, with the reasons.
        await change(["a", "./b", "~", "", "https://x/a", "file:a"], []);
        for (const dir of [a, b]) {
          const r = await read(dir);
          assert.ok(r.isError, dir);
          assert.match(r.text, /no allowed directories: .*; ignored "a": neither a file:\/\/ URI nor an absolute path \(relative paths are not taken\)/);
          assert.match(r.text, /; ignored "https:\/\/x\/a": a https:\/\/ URI/);
        }
        await change([`file://${a}`, `file://${b}`, `file://${a}/`], [a, b]);
        assert.equal((await read(a)).text, "in a\n");
        // The whole configured directory, and no further.
        await change([`file://${l.ws}`, `file://${l.srv}`], [l.ws]);
        assert.equal((await read(a)).text, "in a\n");
        assert.ok((await call(client, "read_text_file", { path: path.join(l.priv, "key.txt") })).isError);
      } finally { await close(); }
      assert.ok(!fs.existsSync(path.join(l.ws, "planted.txt")));
    });
  }
});
