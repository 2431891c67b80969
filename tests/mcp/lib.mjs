// Shared helpers of the MCP tests: start capfs mcp (local, through a capfs server, or through a
// --remote-command) or the reference filesystem server under the official SDK client, call
// tools, and snapshot trees.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const CAPFS = process.env.CAPFS_BIN ?? path.join(here, "../../target/debug/capfs");
export const REFERENCE = path.join(here, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");

/** The directories `tempDir` made, removed when the test file's process exits. */
const made = [];
process.on("exit", () => {
  for (const dir of made) {
    try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* left for the system */ }
  }
});

/** A fresh directory under the system's temporary directory, its real path; removed with
 *  everything in it when the process exits. */
export function tempDir(prefix) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), `capfs-mcp-${prefix}-`)));
  made.push(dir);
  return dir;
}

/** The SDK client connected over `transport`, answering `roots/list` with `roots.current`
 *  when `roots` is given. */
async function clientOn(transport, roots) {
  const capabilities = roots ? { roots: { listChanged: true } } : {};
  const client = new Client({ name: "capfs-mcp-tests", version: "1.0.0" }, { capabilities });
  if (roots) {
    const { ListRootsRequestSchema } = await import("@modelcontextprotocol/sdk/types.js");
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: roots.current }));
  }
  await client.connect(transport);
  return client;
}

/** Connects the SDK client to a server command; returns { client, close, stderr }. */
export async function connect(command, args, { roots } = {}) {
  const transport = new StdioClientTransport({ command, args, stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (chunk) => { stderr += chunk; });
  const client = await clientOn(transport, roots);
  return { client, close: () => client.close(), stderr: () => stderr };
}

/** capfs mcp on local directories; `extra` are more arguments (--read-only DIR, --audit-log F). */
export function capfsLocal(dirs, extra = [], options) {
  return connect(CAPFS, ["mcp", ...extra, ...dirs], options);
}

/** The reference server on `dirs`. */
export function reference(dirs, options) {
  return connect(process.execPath, [REFERENCE, ...dirs], options);
}

/** capfs mcp through `capfs serve --listen stdio` run as its --remote-command. */
export function capfsRemoteCommand(dirs, serveExtra = []) {
  const roots = dirs.flatMap((d) => ["--root", d]).join(" ");
  const command = `'${CAPFS}' serve --listen stdio ${roots} ${serveExtra.join(" ")}`;
  return connect(CAPFS, ["mcp", "--remote-command", command, ...dirs]);
}

/** Starts `capfs serve` on 127.0.0.1 port 0; returns { url, stop }. */
export async function startServer(dirs, extra = []) {
  const args = ["serve", "--listen", "ws://127.0.0.1:0", ...dirs.flatMap((d) => ["--root", d]), ...extra];
  const child = spawn(CAPFS, args, { stdio: ["ignore", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: child.stdout });
  const url = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`capfs serve exited with ${code}`)));
  });
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once("exit", resolve);
    child.kill("SIGTERM");
  });
  return { url, stop };
}

/** Calls a tool; returns { text, isError, structured, result }. */
export async function call(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  const text = (result.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
  return { text, isError: result.isError === true, structured: result.structuredContent, result };
}

/** Every file, directory and link below `root` with its contents' hash: equal snapshots mean
 *  the tree is byte-identical. */
export function snapshot(root) {
  const out = {};
  const walk = (dir) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const p = path.join(dir, name);
      const rel = path.relative(root, p);
      const st = fs.lstatSync(p);
      if (st.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(p)}`;
      else if (st.isDirectory()) { out[rel] = "dir"; walk(p); }
      else out[rel] = `file:${st.mode & 0o7777}:${createHash("sha256").update(fs.readFileSync(p)).digest("hex")}`;
    }
  };
  walk(root);
  return out;
}

/** The median of numbers. */
export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** capfs mcp on `dirs` through `capfs serve --listen stdio` run as its --remote-command, the
 *  server serving `serveRoots` (which may be wider than `dirs`). */
export function capfsThroughCommand(serveRoots, dirs, options) {
  const roots = serveRoots.map((d) => `--root '${d}'`).join(" ");
  const command = `'${CAPFS}' serve --listen stdio ${roots}`;
  return connect(CAPFS, ["mcp", "--remote-command", command, ...dirs], options);
}

/** capfs mcp on `dirs` through `capfs serve` on 127.0.0.1 port 0 serving `serveRoots`; its
 *  close also stops the server. */
export async function capfsThroughServer(serveRoots, dirs, options) {
  const server = await startServer(serveRoots);
  try {
    const c = await connect(CAPFS, ["mcp", "--remote", server.url, ...dirs], options);
    return { ...c, close: async () => { await c.close(); await server.stop(); } };
  } catch (e) {
    await server.stop();
    throw e;
  }
}

/** Calls list_allowed_directories until its first block is `text`, at most 500 times and
 *  10 s (each call is a round trip: no sleeping); returns the last text seen. */
export async function awaitAllowed(client, text) {
  const deadline = Date.now() + 10_000;
  let last;
  for (let i = 0; i < 500 && Date.now() < deadline; i++) {
    const r = await client.callTool({ name: "list_allowed_directories", arguments: {} });
    last = r.content[0].text;
    if (last === text) return last;
  }
  return last;
}

/** Starts `capfs mcp --listen http://127.0.0.1:0/mcp` (or `listen`) on `dirs` with the bearer
 *  token `token` (CAPFS_TOKEN); returns { url, pid, stop, stderr }. */
export async function startHttp(dirs, extra = [], { token = "test-token", env = {}, listen = "http://127.0.0.1:0/mcp" } = {}) {
  const args = ["mcp", "--listen", listen, ...extra, ...dirs];
  const child = spawn(CAPFS, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, CAPFS_TOKEN: token, RUST_LOG: "capfs=debug", ...env },
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  const lines = readline.createInterface({ input: child.stdout });
  const url = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`capfs mcp --listen exited with ${code}: ${stderr}`)));
  });
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once("exit", resolve);
    child.kill("SIGTERM");
  });
  return { url, pid: child.pid, stop, stderr: () => stderr };
}

/** Connects the SDK client to `url` with its Streamable HTTP transport and `token`; returns
 *  { client, transport, close }. */
export async function connectHttp(url, token, { roots, headers = {} } = {}) {
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } },
  });
  const client = await clientOn(transport, roots);
  return { client, transport, close: () => client.close() };
}

/** capfs mcp --listen on local directories under the SDK's Streamable HTTP client; its close
 *  also stops the server. The same shape as `capfsLocal`'s. */
export async function capfsHttp(dirs, extra = [], options) {
  const token = "test-token";
  const server = await startHttp(dirs, extra, { token });
  try {
    const c = await connectHttp(server.url, token, options);
    return { ...c, stderr: server.stderr, close: async () => { await c.close(); await server.stop(); } };
  } catch (e) {
    await server.stop();
    throw e;
  }
}
