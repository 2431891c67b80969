// What the codex tests share: a scripted stand-in for the Responses API, `capfs serve` on
// 127.0.0.1 port 0, and `codex exec` pointed at it as its executor.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

export const CAPFS_BIN = process.env.CAPFS_BIN;
if (!CAPFS_BIN) throw new Error('CAPFS_BIN must name the capfs binary under test');

// The pinned codex packages: `@openai/codex` itself and the next release under an npm alias.
// Both name their command `codex`, so `node_modules/.bin/codex` may be either: each is started
// by its own wrapper, or by the native binary inside its platform package (without the node
// wrapper in front of it, a process the tests end by its pid is the server itself, and
// nothing it started outlives it).
function codexPackage(version, dir) {
  const root = path.join(import.meta.dirname, 'node_modules', dir);
  let platform;
  try {
    platform = path.dirname(createRequire(path.join(root, 'package.json')).resolve('@openai/codex-linux-x64/package.json'));
  } catch {
    // Not installed (another platform, or no `npm ci` yet): the test that starts it says so.
    platform = path.join(root, 'node_modules', '@openai', 'codex-linux-x64');
  }
  return { version, bin: path.join(root, 'bin', 'codex.js'), native: path.join(platform, 'vendor', 'x86_64-unknown-linux-musl', 'bin', 'codex') };
}
export const CODEX_PACKAGES = [codexPackage('0.169.0', '@openai/codex'), codexPackage('0.171.0', 'codex-0171')];
export const CODEX_BIN = CODEX_PACKAGES[0].bin;
export const CODEX_NATIVE_BIN = CODEX_PACKAGES[0].native;

// A model whose bundled metadata offers apply_patch as a freeform tool; the stand-in answers
// for it, so no request leaves the machine.
const MODEL = 'gpt-6-astra';

// Whether `dir` (real path) lies under `base`, component by component.
const under = (dir, base) => dir === base || dir.startsWith(base.endsWith('/') ? base : `${base}/`);

// The first of `bases` that exists, is a directory this process may write in, and passes `ok`.
function pickBase(bases, ok, what) {
  for (const base of bases) {
    if (!base) continue;
    let real;
    try {
      real = fs.realpathSync(base);
      if (!fs.statSync(real).isDirectory()) continue;
      fs.accessSync(real, fs.constants.W_OK | fs.constants.X_OK);
    } catch {
      continue;
    }
    if (ok(real)) return real;
  }
  throw new Error(`no directory for ${what} among ${bases.filter(Boolean).join(', ')}`);
}

// Whether every directory from / down to `dir` lets others through (their x bit): a uid
// that is neither owner nor group can reach what lies below.
function traversable(dir) {
  for (let d = dir; ; d = path.dirname(d)) {
    if (!(fs.statSync(d).mode & 0o001)) return false;
    if (d === '/') return true;
  }
}

// Every scratch directory made here, removed when this process exits, whatever the test did.
const made = [];
process.on('exit', () => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

// A fresh directory for trees that sandboxed processes reach, running as another uid: under
// a base every ancestor of which that uid can traverse, whatever the checkout's location
// (a clone under /root or under a 0700 directory included). Made 0755.
export function scratch(name) {
  const base = pickBase(['/var/tmp', '/tmp', os.tmpdir()], traversable, 'trees other uids reach');
  const dir = fs.mkdtempSync(path.join(base, `capfs-codex-${name}-`));
  made.push(dir);
  fs.chmodSync(dir, 0o755);
  return dir;
}

// A fresh directory for a codex home (CODEX_HOME). codex links its helpers (apply_patch,
// codex-linux-sandbox) into a directory under its home at start, and refuses to when the
// home, made canonical, lies under the system temporary directory as Rust names it ($TMPDIR,
// or /tmp when unset): the helpers are then missing from PATH, and its sandbox cannot start
// ("Unable to spawn codex-linux-sandbox"). So the home goes under a base outside that
// directory, whatever the checkout's location.
export function codexScratch(name) {
  const temps = [process.env.TMPDIR || '/tmp'];
  try {
    temps.push(fs.realpathSync(temps[0]));
  } catch {}
  const outsideTemp = (real) => !temps.some((t) => under(real, t));
  const base = pickBase(['/var/tmp', process.env.XDG_CACHE_HOME, os.homedir(), import.meta.dirname], outsideTemp, 'codex homes');
  const dir = fs.mkdtempSync(path.join(base, `capfs-codex-${name}-`));
  made.push(dir);
  return dir;
}

// Serves one scripted turn per request: each turn is a list of items, a function call
// `{call, args}`, a freeform tool call `{tool, input}` or a message `{say}`, or a function of
// the requests so far returning that list (a turn that answers what codex said). Every
// request body is kept, for the test to read what codex sent.
export async function scriptedModel(turns) {
  const requests = [];
  let next = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (!req.url.endsWith('/responses')) {
        res.writeHead(404).end();
        return;
      }
      requests.push(JSON.parse(body));
      const turn = turns[Math.min(next, turns.length - 1)];
      const items = typeof turn === 'function' ? turn(requests) : turn;
      next += 1;
      const id = `resp-${next}`;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const send = (event) => res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
      send({ type: 'response.created', response: { id } });
      items.forEach((it, i) => {
        const callId = `call-${next}-${i}`;
        let item;
        if (it.call) item = { type: 'function_call', call_id: callId, name: it.call, arguments: JSON.stringify(it.args) };
        else if (it.tool) item = { type: 'custom_tool_call', call_id: callId, name: it.tool, input: it.input };
        else item = { type: 'message', role: 'assistant', id: `msg-${next}-${i}`, content: [{ type: 'output_text', text: it.say }] };
        send({ type: 'response.output_item.done', item });
      });
      const usage = { input_tokens: 0, input_tokens_details: null, output_tokens: 0, output_tokens_details: null, total_tokens: 0 };
      send({ type: 'response.completed', response: { id, usage } });
      res.end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/v1`, requests, close: () => server.close() };
}

// `capfs serve` with `args`, on 127.0.0.1 port 0; resolves once it printed its URL.
export async function capfsServe(args, env = {}) {
  const child = spawn(CAPFS_BIN, ['serve', '--listen', 'ws://127.0.0.1:0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ws://'));
      if (line) resolve(line.trim());
    });
    child.on('exit', (code) => reject(new Error(`capfs serve exited ${code}: ${stderr}`)));
  });
  return { url, stop: () => child.kill('SIGTERM'), stderr: () => stderr };
}

// A WebSocket server binary on 127.0.0.1 port 0, started in `cwd` with `env` added to this
// process's, in a process group of its own (what it signals by group never reaches the
// harness's, and `stop` ends everything it started); resolves once it printed its URL.
export async function serveInGroup(bin, args, { cwd, env = {} } = {}) {
  const child = spawn(bin, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  const url = await new Promise((resolve, reject) => {
    const look = (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ws://'));
      if (line) resolve(line.trim());
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.on('exit', (code) => reject(new Error(`${path.basename(bin)} exited ${code}: ${out}`)));
  });
  child.stdout.removeAllListeners('data');
  child.stderr.removeAllListeners('data');
  child.stdout.resume();
  child.stderr.resume();
  const stop = () => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {}
  };
  return { url, pid: child.pid, port: Number(new URL(url).port), stop, child };
}

// One `codex exec` turn in `cwd` with `sandbox` mode, against the executor at `executor`, by
// the codex wrapper `bin` (the first pinned package's unless told). With `environments` (the text of `environments.toml`) instead of `executor`, codex starts its
// executors as that file says. `config` (TOML lines) is added to its config.toml after the
// provider's table, `top` (TOML lines) before it, at the top level; `env` to its environment.
export async function codexExec({ home, model, executor, environments, cwd, sandbox, prompt, bin = CODEX_BIN, config = [], top = [], env: extraEnv = {} }) {
  fs.writeFileSync(
    path.join(home, 'config.toml'),
    [
      ...top,
      `model = "${MODEL}"`,
      'model_provider = "scripted"',
      '[model_providers.scripted]',
      'name = "scripted"',
      `base_url = "${model.url}"`,
      'wire_api = "responses"',
      ...config,
      '',
    ].join('\n'),
  );
  const env = { ...process.env, ...extraEnv, CODEX_HOME: home };
  if (executor) env.CODEX_EXEC_SERVER_URL = executor;
  if (environments) fs.writeFileSync(path.join(home, 'environments.toml'), environments);
  delete env.OPENAI_API_KEY;
  // No `sandbox`: no `-s`, the permission profile of the config decides.
  const sandboxArgs = sandbox ? ['-s', sandbox] : [];
  const child = spawn(process.execPath, [bin, 'exec', '--skip-git-repo-check', ...sandboxArgs, prompt], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const code = await new Promise((resolve) => child.on('exit', resolve));
  clearTimeout(timer);
  return { code, output };
}

// Every text codex sent the model, joined: prompts, instructions and tool outputs.
export function sentText(requests) {
  return requests.map((r) => JSON.stringify(r)).join('\n');
}

// A valid PNG of `side` x `side` RGBA pixels, noisy so that it does not compress.
export function png(side) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(side, 0);
  header.writeUInt32BE(side, 4);
  header[8] = 8;
  header[9] = 6;
  const rows = Buffer.alloc((side * 4 + 1) * side);
  let seed = 12345;
  for (let i = 0; i < rows.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    rows[i] = i % (side * 4 + 1) === 0 ? 0 : seed >>> 24;
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', zlib.deflateSync(rows, { level: 0 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

// `codex exec-server` on 127.0.0.1 port 0, from the pinned package; resolves once it printed
// its URL.
export async function codexExecServer(home) {
  const child = spawn(process.execPath, [CODEX_BIN, 'exec-server', '--listen', 'ws://127.0.0.1:0'], {
    env: { ...process.env, CODEX_HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const look = (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ws://'));
      if (line) resolve(line.trim());
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.on('exit', (code) => reject(new Error(`codex exec-server exited ${code}: ${out}`)));
  });
  return { url, stop: () => child.kill('SIGTERM') };
}

// A JSON-RPC peer over WebSocket: `request` resolves with the whole reply message. `headers`
// go with the upgrade (a bearer token); `onNotification` sees each notification as it comes.
export async function peer(url, { headers, onNotification } = {}) {
  const { WebSocket } = await import('ws');
  const ws = new WebSocket(url, { maxPayload: 256 * 1024 * 1024, headers });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const waiting = new Map();
  const notifications = [];
  ws.on('message', (data) => {
    const message = JSON.parse(data.toString());
    if (message.id !== undefined && waiting.has(message.id)) {
      waiting.get(message.id)(message);
      waiting.delete(message.id);
    } else if (message.method) {
      if (onNotification) onNotification(message);
      else notifications.push(message);
    }
  });
  let next = 1;
  const request = (method, params) =>
    new Promise((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => reject(new Error(`${method}: no reply in time`)), 30_000);
      waiting.set(id, (reply) => {
        clearTimeout(timer);
        resolve(reply);
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
  const notify = (method, params) => ws.send(JSON.stringify({ method, params }));
  const closed = new Promise((resolve) => ws.once('close', resolve));
  return { request, notify, notifications, closed, close: () => ws.close() };
}
