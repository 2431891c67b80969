// The MCP bench: median latency of get_file_info and of read_text_file on a 4 KiB file, and the
// time of search_files over 50,000 files, for capfs mcp (local and through --remote-command)
// beside the reference filesystem server, in one run, as ratios. Prints; asserts nothing.
import fs from "node:fs";
import path from "node:path";
import { call, capfsLocal, capfsRemoteCommand, median, reference, tempDir } from "./lib.mjs";

const CALLS = Number(process.env.BENCH_CALLS ?? 300);
const DIRS = 100, FILES_PER_DIR = 500;

const ws = tempDir("bench");
fs.writeFileSync(path.join(ws, "four-k.txt"), "x".repeat(4095) + "\n");
for (let d = 0; d < DIRS; d++) {
  const dir = path.join(ws, `dir-${d}`);
  fs.mkdirSync(dir);
  for (let f = 0; f < FILES_PER_DIR; f++) {
    fs.writeFileSync(path.join(dir, f === 0 ? "match.rs" : `file-${f}.txt`), "");
  }
}

async function measure(label, start, searchRuns) {
  const { client, close } = await start();
  try {
    const time = async (name, args) => {
      const t = process.hrtime.bigint();
      const r = await call(client, name, args);
      if (r.isError) throw new Error(`${label} ${name}: ${r.text}`);
      return Number(process.hrtime.bigint() - t) / 1e6;
    };
    const floor = [], info = [], read = [], search = [];
    for (let i = 0; i < 20; i++) await time("get_file_info", { path: path.join(ws, "four-k.txt") });
    // The floor: a tool that touches no file, so client, transport and server framing only.
    for (let i = 0; i < CALLS; i++) floor.push(await time("list_allowed_directories", {}));
    for (let i = 0; i < CALLS; i++) info.push(await time("get_file_info", { path: path.join(ws, "four-k.txt") }));
    for (let i = 0; i < CALLS; i++) read.push(await time("read_text_file", { path: path.join(ws, "four-k.txt") }));
    for (let i = 0; i < searchRuns; i++) search.push(await time("search_files", { path: ws, pattern: "**/*.rs" }));
    return { label, floor: median(floor), info: median(info), read: median(read), search: median(search) };
  } finally { await close(); }
}

const ref = await measure("reference", () => reference([ws]), 1);
const rows = [
  await measure("capfs local", () => capfsLocal([ws]), 3),
  await measure("capfs --remote-command", () => capfsRemoteCommand([ws]), 3),
];
const f = (ms) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(3));
console.log(`MCP bench: ${CALLS} calls each (median), search_files over ${DIRS * FILES_PER_DIR} files`);
console.log("| server | list_allowed_directories (no file call) ms | get_file_info ms | read_text_file 4 KiB ms | search_files 50,000 files ms |");
console.log("|---|---|---|---|---|");
console.log(`| reference 2026.8.31 | ${f(ref.floor)} | ${f(ref.info)} | ${f(ref.read)} | ${f(ref.search)} |`);
const ratio = (a, b, digits = 2) => `${(a / b).toFixed(digits)}x`;
for (const r of rows) {
  console.log(`| ${r.label} | ${f(r.floor)} (${ratio(r.floor, ref.floor)}) | ${f(r.info)} (${ratio(r.info, ref.info)}) | ${f(r.read)} (${ratio(r.read, ref.read)}) | ${f(r.search)} (${ratio(r.search, ref.search, 3)}) |`);
}
fs.rmSync(ws, { recursive: true, force: true });
