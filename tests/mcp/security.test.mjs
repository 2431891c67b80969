// Escapes and races. capfs must leave the outside canary tree byte-identical and leak nothing
// through any tool; the reference server runs the same attempts, and its results are printed
// beside capfs's as a comparison (not asserted).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { describe, test } from "node:test";
import { call, capfsLocal, capfsRemoteCommand, reference, snapshot, tempDir } from "./lib.mjs";

const SECRET = "OUTSIDE-SECRET";
const RACE_MS = Number(process.env.RACE_MS ?? 2000);

function escapeLayout(label) {
  const base = tempDir(label);
  const ws = path.join(base, "ws");
  const outside = path.join(base, "outside");
  const sibling = path.join(base, "ws-sibling");
  for (const d of [ws, outside, sibling, path.join(outside, "sub")]) fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(outside, "secret.txt"), `${SECRET}\n`);
  fs.writeFileSync(path.join(outside, "sub", "outside-only-name.txt"), `${SECRET}\n`);
  fs.writeFileSync(path.join(sibling, "sibling.txt"), `${SECRET}\n`);
  fs.writeFileSync(path.join(ws, "mine.txt"), "mine\n");
  fs.symlinkSync(path.join(outside, "secret.txt"), path.join(ws, "link-file"));
  fs.symlinkSync(outside, path.join(ws, "link-dir"));
  fs.symlinkSync(path.join(outside, "created-through-dangling.txt"), path.join(ws, "dangling"));
  fs.symlinkSync("../outside/secret.txt", path.join(ws, "relative-link"));
  return { base, ws, outside, sibling };
}

/** Every tool against every escape path; returns the number of attempts and of leaks. */
async function escapeAttempts(client, { ws, outside, sibling }) {
  const targets = [
    "../outside/secret.txt", path.join(ws, "../outside/secret.txt"), path.join(outside, "secret.txt"),
    outside, path.join(outside, "sub"), path.join(sibling, "sibling.txt"), sibling,
    path.join(ws, "link-file"), path.join(ws, "link-dir"), path.join(ws, "link-dir/secret.txt"),
    path.join(ws, "link-dir/sub"), path.join(ws, "relative-link"), path.join(ws, "dangling"),
    "~/capfs-escape-canary.txt", "~",
  ];
  const attempts = [];
  for (const t of targets) {
    attempts.push(
      ["read_file", { path: t }], ["read_text_file", { path: t }], ["read_text_file", { path: t, tail: 1 }],
      ["read_media_file", { path: t }], ["read_multiple_files", { paths: [t] }],
      ["write_file", { path: t, content: "PWNED" }],
      ["edit_file", { path: t, edits: [{ oldText: "OUTSIDE", newText: "PWNED" }] }],
      ["edit_file", { path: t, edits: [{ oldText: "OUTSIDE", newText: "PWNED" }], dryRun: true }],
      ["create_directory", { path: path.join(t, "made-by-escape") }], ["create_directory", { path: t }],
      ["list_directory", { path: t }], ["list_directory_with_sizes", { path: t }],
      ["directory_tree", { path: t }], ["search_files", { path: t, pattern: "**" }],
      ["get_file_info", { path: t }],
      ["move_file", { source: t, destination: path.join(ws, "pulled-in") }],
      ["move_file", { source: path.join(ws, "mine.txt"), destination: path.join(t, "pushed-out.txt") }],
    );
  }
  let leaks = 0;
  const leaked = [];
  for (const [name, args] of attempts) {
    const r = await call(client, name, args);
    const body = JSON.stringify(r.result);
    const leak = body.includes(SECRET) || body.includes("outside-only-name")
      || body.includes("T1VUU0lERS1TRUNSRVQ") /* the secret in base64 */
      || (name === "get_file_info" && !r.isError && args.path !== "~");
    if (leak) { leaks++; leaked.push(`${name} ${JSON.stringify(args)}`); }
  }
  // Sizes of what links point at, listed from inside the root.
  const sizes = await call(client, "list_directory_with_sizes", { path: ws });
  if (/link-file +15 B/.test(sizes.text)) { leaks++; leaked.push("list_directory_with_sizes shows the size of an outside file"); }
  return { attempts: attempts.length + 1, leaks, leaked };
}

describe("escapes through every tool", () => {
  const results = {};
  for (const [label, start] of [
    ["capfs (local)", (l) => capfsLocal([l.ws])],
    ["capfs (--remote-command)", (l) => capfsRemoteCommand([l.ws])],
    ["reference", (l) => reference([l.ws])],
  ]) {
    test(label, async () => {
      const layout = escapeLayout("escape");
      const before = snapshot(layout.outside);
      const siblingBefore = snapshot(layout.sibling);
      const { client, close } = await start(layout);
      let r;
      try { r = await escapeAttempts(client, layout); } finally { await close(); }
      const changed = JSON.stringify(snapshot(layout.outside)) !== JSON.stringify(before)
        || JSON.stringify(snapshot(layout.sibling)) !== JSON.stringify(siblingBefore);
      results[label] = { ...r, changed };
      console.log(`escapes ${label}: ${r.attempts} attempts, ${r.leaks} leaked, outside tree ${changed ? "CHANGED" : "byte-identical"}`);
      for (const l of r.leaked.slice(0, 20)) console.log(`  leak: ${l}`);
      if (label.startsWith("capfs")) {
        assert.equal(r.leaks, 0, r.leaked.join("\n"));
        assert.equal(changed, false, "the outside tree is byte-identical");
      }
    });
  }
});

function raceLayout() {
  const base = tempDir("race");
  const ws = path.join(base, "ws");
  const outside = path.join(base, "outside");
  fs.mkdirSync(path.join(ws, "d"), { recursive: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(ws, "d", "secret.txt"), "inside SECRET\n");
  fs.writeFileSync(path.join(outside, "secret.txt"), `${SECRET}\n`);
  fs.writeFileSync(path.join(outside, "pull.txt"), `${SECRET}\n`);
  return { ws, outside };
}

/** Runs one operation in a loop for RACE_MS while the attacker swaps `d`; returns escapes. */
async function race(start, op) {
  const { ws, outside } = raceLayout();
  const before = snapshot(outside);
  const { client, close } = await start(ws);
  const stop = new SharedArrayBuffer(8);
  const flag = new Int32Array(stop);
  const worker = new Worker(new URL("./attacker.mjs", import.meta.url), { workerData: { ws, outside, stop } });
  const exited = new Promise((resolve) => worker.once("exit", resolve));
  let attempts = 0, leaks = 0;
  const deadline = Date.now() + RACE_MS;
  try {
    while (Date.now() < deadline) {
      const i = attempts++;
      const d = path.join(ws, "d");
      let r;
      switch (op) {
        case "write_file": r = await call(client, op, { path: path.join(d, `w-${i}.txt`), content: "x" }); break;
        case "read_text_file": r = await call(client, op, { path: path.join(d, "secret.txt") }); break;
        case "edit_file": r = await call(client, op, { path: path.join(d, "secret.txt"), edits: [{ oldText: "SECRET", newText: "SECRET" }] }); break;
        case "create_directory": r = await call(client, op, { path: path.join(d, `nd-${i}`) }); break;
        case "move_file":
          if (i % 2 === 0) r = await call(client, op, { source: path.join(d, "pull.txt"), destination: path.join(ws, `pulled-${i}.txt`) });
          else {
            fs.writeFileSync(path.join(ws, `mine-${i}.txt`), "mine\n");
            r = await call(client, op, { source: path.join(ws, `mine-${i}.txt`), destination: path.join(d, `out-${i}.txt`) });
          }
          break;
      }
      if (JSON.stringify(r.result).includes(SECRET.slice(0, 7))) leaks++;
    }
  } finally {
    Atomics.store(flag, 0, 1);
    await exited;
    await close();
  }
  const after = snapshot(outside);
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  const changed = [...keys].filter((k) => before[k] !== after[k]).length;
  return { attempts, swaps: Atomics.load(flag, 1), leaks, changed, escapes: leaks + changed };
}

describe("race: an attacker swaps an intermediate directory for a symlink to outside", () => {
  const ops = ["write_file", "read_text_file", "edit_file", "move_file", "create_directory"];
  const rows = [];
  for (const op of ops) {
    test(op, async () => {
      const capfs = await race((ws) => capfsLocal([ws]), op);
      const ref = await race((ws) => reference([ws]), op);
      rows.push({ op, capfs, ref });
      console.log(`race ${op}: capfs ${capfs.escapes} escapes in ${capfs.attempts} calls (${capfs.swaps} swaps); reference ${ref.escapes} escapes in ${ref.attempts} calls (${ref.swaps} swaps; ${ref.leaks} leaked reads, ${ref.changed} outside entries changed)`);
      assert.ok(capfs.swaps > 0, "the attacker ran");
      assert.equal(capfs.escapes, 0, `capfs escaped through ${op}`);
    });
  }
});
