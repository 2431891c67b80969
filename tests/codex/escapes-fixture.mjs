// The trees, sockets and checks the escape table is played against: a base holding the roots
// and the canary tree, the harness's listeners that count who reached them, a byte-for-byte
// snapshot of what must not change, and the search for processes that outlived their case.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { scratch } from './lib.mjs';

// The uid sandboxed commands run as where the executor lets the harness choose (capfs's
// `--exec-user`, landrun under setpriv); codex runs them as itself.
export const EXEC_UID = 65534;

const token = () => crypto.randomBytes(12).toString('hex');

// A fresh base with root/, ro/ and out/, the listeners, and the placeholder values.
export async function fixture() {
  const base = scratch('esc');
  fs.chmodSync(base, 0o755);
  const dirs = { base, root: path.join(base, 'root'), ro: path.join(base, 'ro'), out: path.join(base, 'out') };
  const secret = `secret-${token()}`;
  // The executors and the harness itself hold the secret in their environment.
  process.env.CAPFS_ESCAPE_SECRET = secret;
  for (const d of [dirs.root, dirs.ro, dirs.out]) fs.mkdirSync(d);
  const f = { dirs, secret, listeners: await listeners(base) };
  populate(f);
  f.vars = {
    BASE: base,
    ROOT: dirs.root,
    RO: dirs.ro,
    OUT: dirs.out,
    SECRET: secret,
    NONCE: token(),
    HARNESS_PID: String(process.pid),
    EXEC_UID: String(EXEC_UID),
    PORT: String(f.listeners.tcp.port),
    UDP_PORT: String(f.listeners.udp.port),
    HOST_IP: f.listeners.host?.ip,
    HOST_PORT: f.listeners.host ? String(f.listeners.host.port) : undefined,
    ABSTRACT: f.listeners.abstract.name,
    HOST_SOCK: f.listeners.hostSock.path,
  };
  return f;
}

// Writes every tree as the table's placeholders describe it. The canary tree and the read-only
// root are world-writable, so that a write that fails was stopped by the sandbox, not by the
// owner's bits; the read-write root belongs to `owner`, the uid commands run as.
export function populate(f, owner = EXEC_UID) {
  const { root, ro, out } = f.dirs;
  clear(root);
  clear(ro);
  clear(out);
  const put = (file, text, mode = 0o666) => {
    fs.writeFileSync(file, text);
    fs.chmodSync(file, mode);
  };
  fs.chmodSync(out, 0o777);
  put(path.join(out, 'secret.txt'), `${f.secret}\n`);
  fs.mkdirSync(path.join(out, 'sub'), { mode: 0o777 });
  fs.chmodSync(path.join(out, 'sub'), 0o777);
  put(path.join(out, 'sub', 'deep.txt'), `deep ${f.secret}\n`);
  put(path.join(out, 'hard.txt'), `hard ${f.secret}\n`);
  put(path.join(out, 'owned.txt'), 'owned\n');
  fs.chownSync(path.join(out, 'owned.txt'), EXEC_UID, EXEC_UID);
  put(path.join(out, 'run.sh'), `#!/bin/sh\necho ran ${f.secret}\n`, 0o777);
  fs.chmodSync(ro, 0o777);
  put(path.join(ro, 'ro.txt'), 'readonly\n');
  fs.copyFileSync('/usr/bin/id', path.join(ro, 'suid-id'));
  fs.chmodSync(path.join(ro, 'suid-id'), 0o4755);
  put(path.join(root, 'inside.txt'), 'inside\n', 0o644);
  fs.linkSync(path.join(out, 'hard.txt'), path.join(root, 'planted-hardlink.txt'));
  fs.symlinkSync(out, path.join(root, 'cwd-link'));
  const nested = path.join(root, 'nested-ro');
  fs.mkdirSync(nested, { mode: 0o777 });
  fs.chmodSync(nested, 0o777);
  put(path.join(nested, 'nested.txt'), 'nested readonly\n');
  for (const entry of ['inside.txt', 'cwd-link']) fs.lchownSync(path.join(root, entry), owner, owner);
  fs.chownSync(root, owner, owner);
  fs.chmodSync(root, 0o755);
}

// Empties a directory in place: the executors hold the roots by identity, so the directory
// itself must stay the same one.
function clear(dir) {
  if (!fs.existsSync(dir)) fs.mkdirSync(dir);
  for (const name of fs.readdirSync(dir)) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
}

// Every entry under `dir` by its relative name: type, mode, owner, size, modification time,
// contents and link target. Access times are left out: a read changes them.
export function snapshot(dir) {
  const entries = {};
  const walk = (rel) => {
    const abs = path.join(dir, rel);
    let st;
    try {
      st = fs.lstatSync(abs, { bigint: true });
    } catch (e) {
      entries[rel] = `missing: ${e.code}`;
      return;
    }
    const meta = { mode: st.mode.toString(8), uid: String(st.uid), gid: String(st.gid), size: String(st.size), mtime: String(st.mtimeNs), ino: String(st.ino) };
    if (st.isSymbolicLink()) meta.link = fs.readlinkSync(abs);
    else if (st.isFile()) meta.sha = crypto.createHash('sha256').update(fs.readFileSync(abs)).digest('hex');
    else if (st.isDirectory()) fs.readdirSync(abs).sort().forEach((n) => walk(path.join(rel, n)));
    entries[rel] = meta;
  };
  walk('.');
  return JSON.stringify(entries);
}

// What differs between two snapshots, named by path, for the report.
export function changes(before, after) {
  const a = JSON.parse(before);
  const b = JSON.parse(after);
  const names = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...names].filter((n) => JSON.stringify(a[n]) !== JSON.stringify(b[n]));
}

// The harness's sockets: each counts the peers that reached it.
async function listeners(base) {
  const counting = () => {
    const l = { count: 0 };
    l.server = net.createServer((s) => {
      l.count += 1;
      s.on('error', () => {});
      s.end();
    });
    return l;
  };
  const listen = (l, ...args) => new Promise((resolve, reject) => {
    l.server.once('error', reject);
    l.server.listen(...args, resolve);
  });
  const tcp = counting();
  await listen(tcp, 0, '127.0.0.1');
  tcp.port = tcp.server.address().port;
  const abstract = counting();
  abstract.name = `capfs-escape-${token()}`;
  await listen(abstract, `\0${abstract.name}`);
  const sockDir = path.join(base, 'sock');
  fs.mkdirSync(sockDir, { mode: 0o777 });
  fs.chmodSync(sockDir, 0o777);
  const hostSock = counting();
  hostSock.path = path.join(sockDir, 'host.sock');
  await listen(hostSock, hostSock.path);
  fs.chmodSync(hostSock.path, 0o777);
  const udp = { count: 0, server: dgram.createSocket('udp4') };
  udp.server.on('message', () => (udp.count += 1));
  await new Promise((resolve) => udp.server.bind(0, '127.0.0.1', resolve));
  udp.port = udp.server.address().port;
  // A listener on a non-loopback address of this host, if it has one: what "loopback only"
  // must keep out.
  let host;
  const ip = Object.values(os.networkInterfaces()).flat().find((i) => i.family === 'IPv4' && !i.internal)?.address;
  if (ip) {
    host = counting();
    host.ip = ip;
    await listen(host, 0, ip);
    host.port = host.server.address().port;
  }
  const all = [tcp, abstract, hostSock, udp, host].filter(Boolean);
  const counts = () => ({ listener: tcp.count, abstract: abstract.count, host_socket: hostSock.count, udp: udp.count, host_listener: host?.count ?? 0 });
  const close = () => all.forEach((l) => l.server.close());
  return { tcp, abstract, hostSock, udp, host, counts, close };
}

// The pids of processes whose command line is `sleep MARK`.
export function sleepers(mark) {
  const found = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let cmdline;
    try {
      cmdline = fs.readFileSync(`/proc/${name}/cmdline`, 'latin1');
    } catch {
      continue;
    }
    if (cmdline.split('\0').includes(mark) && cmdline.includes('sleep')) found.push(Number(name));
  }
  return found;
}

// Polls `check` every 20 ms until it is true or `ms` passed; returns its last value.
export async function until(check, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// Runs `bin` with `args` in `cwd`, in a process group of its own, gathering its stdout and
// stderr (as latin1) until it closes or `deadlineMs` passes; once `stopWhen(output)` holds,
// or at the deadline, the whole group is killed.
export async function runGrouped(bin, args, { cwd, deadlineMs, stopWhen }) {
  const child = spawn(bin, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  child.stdout.on('data', (d) => (output += d.toString('latin1')));
  child.stderr.on('data', (d) => (output += d.toString('latin1')));
  let exitCode = null;
  let closed = false;
  child.on('close', (code) => {
    exitCode = code;
    closed = true;
  });
  child.on('error', (e) => {
    output += String(e);
    closed = true;
  });
  const end = () => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {}
  };
  let asked = false;
  const done = await until(() => {
    if (!asked && stopWhen?.(output)) {
      asked = true;
      end();
    }
    return closed;
  }, deadlineMs);
  if (!done) end();
  return { output, exitCode, timedOut: !done };
}

// Whether a process with this pid exists (signal 0 checks without sending).
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

// Fills `{NAME}` placeholders; a placeholder without a value is an error in the table.
export function fill(text, vars) {
  return text.replace(/\{([A-Z_]+)\}/g, (whole, name) => {
    if (vars[name] === undefined) throw new Error(`no value for placeholder ${whole}`);
    return vars[name];
  });
}
