// The egress table (tests/escapes/egress.json) played against executors that take a policy of
// allowed hosts, each given the same policy in its own terms: capfs `serve --exec` with
// `--exec-allow-host`, codex 0.169's and 0.171's own exec-servers with the managed network codex
// sends in `process/start` (`enforceManagedNetwork`, `networkProxy`: the executor starts codex's
// proxy beside the process), without a sandbox and in workspace-write, and sandbox-runtime
// (`srt`) when its package and bubblewrap are here. `node escapes-egress.mjs` prints the
// table; escapes.test.mjs asserts capfs's column.
//
// Nothing leaves 127.0.0.0/8: every server listens on a 127.0.0.x address, and every executor
// runs in a mount namespace of its own where /etc/hosts maps the test names to those addresses
// and /etc/resolv.conf names the harness's DNS counter on another; capfs is given its names by
// `--exec-resolve` besides (the hosts file answers only the name the case wants resolved "as
// DNS would", rebind.test).
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';

import { CAPFS_BIN, CODEX_PACKAGES, codexScratch, serveInGroup } from './lib.mjs';
import { EXEC_UID, alive, fixture, runGrouped } from './escapes-fixture.mjs';
import { WireTarget, workspaceWriteSandbox } from './escapes-targets.mjs';
import { format, playAll } from './escapes.mjs';

export const EGRESS = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, '..', 'escapes', 'egress.json'), 'utf8'));

// The TLS server name a ClientHello carries, or null (not a ClientHello, or none named).
export function serverName(buf) {
  try {
    if (buf[0] !== 0x16 || buf[5] !== 0x01) return null;
    let at = 9 + 2 + 32;
    at += 1 + buf[at];
    at += 2 + buf.readUInt16BE(at);
    at += 1 + buf[at];
    const end = at + 2 + buf.readUInt16BE(at);
    at += 2;
    while (at + 4 <= end) {
      const type = buf.readUInt16BE(at);
      const len = buf.readUInt16BE(at + 2);
      if (type === 0) {
        const nameLen = buf.readUInt16BE(at + 7);
        return buf.subarray(at + 9, at + 9 + nameLen).toString('latin1');
      }
      at += 4 + len;
    }
  } catch {}
  return null;
}

// The name a DNS query asks for.
function queryName(msg) {
  const labels = [];
  let at = 12;
  while (at < msg.length && msg[at] !== 0) {
    labels.push(msg.subarray(at + 1, at + 1 + msg[at]).toString('latin1'));
    at += 1 + msg[at];
  }
  return { name: labels.join('.'), end: at + 5 };
}

// A free 127.0.0.x address for `port` (0: any port), tried from a random start so that
// concurrent runs do not meet; resolves with the listening server.
export async function listenSomewhere(server, port, taken) {
  const start = crypto.randomInt(40, 240);
  for (let i = 0; i < 200; i++) {
    const ip = `127.0.0.${40 + ((start - 40 + i) % 200)}`;
    if (taken.has(ip)) continue;
    const ok = await new Promise((resolve) => {
      const fail = () => resolve(false);
      server.once('error', fail);
      server.listen(port, ip, () => {
        server.off('error', fail);
        resolve(true);
      });
    });
    if (ok) {
      taken.add(ip);
      return ip;
    }
  }
  throw new Error('no free 127.0.0.x address');
}

// An HTTPS server (never listening: the front hands it its connections) answering `answer()`
// with a certificate for allowed.test made by openssl; null without openssl.
function allowedTls(base, answer) {
  const dir = path.join(base, 'tls');
  fs.mkdirSync(dir);
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2',
      '-subj', '/CN=allowed.test', '-addext', 'subjectAltName=DNS:allowed.test'], { stdio: 'ignore' });
  } catch {
    return null;
  }
  return https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (req, res) => res.end(answer()));
}

// The egress servers, each counting what reached it, and the hosts and resolv.conf files the
// executors' mount namespaces are given.
export async function egressServers(base) {
  const taken = new Set(['127.0.0.1']);
  const body = `egress-allowed-${crypto.randomBytes(6).toString('hex')}`;
  const counts = { egress_allowed: 0, egress_forged: 0, egress_other_port: 0, egress_denied: 0, egress_rebind: 0, egress_literal: 0, egress_fronted: 0, dns: 0 };
  const servers = [];
  const counting = (key) => {
    const s = net.createServer((c) => {
      counts[key] += 1;
      c.on('error', () => {});
      c.end();
    });
    servers.push(s);
    return s;
  };
  const allowed = http.createServer((req, res) => {
    counts.egress_allowed += 1;
    if ((req.headers.host ?? '').replace(/:\d+$/, '') !== 'allowed.test') counts.egress_forged += 1;
    res.end(`${body}\n`);
  });
  servers.push(allowed);
  const allowedIp = await listenSomewhere(allowed, 0, taken);
  // On 443 of the same address: a front that routes by server name, as a CDN does. A
  // ClientHello naming another host than allowed.test is counted (and would have been routed
  // there); one naming allowed.test is answered over TLS with a certificate for that name, when
  // openssl is here to make one.
  const tls = allowedTls(base, () => {
    counts.egress_allowed += 1;
    return `${body}\n`;
  });
  if (tls) servers.push(tls);
  const front = net.createServer((c) => {
    c.on('error', () => {});
    c.once('data', (d) => {
      c.pause();
      const name = serverName(d);
      if (name && name !== 'allowed.test') counts.egress_fronted += 1;
      if (name !== 'allowed.test' || !tls) {
        c.destroy();
        return;
      }
      c.unshift(d);
      tls.emit('connection', c);
    });
  });
  servers.push(front);
  await new Promise((resolve, reject) => {
    front.once('error', reject);
    front.listen(443, allowedIp, resolve);
  });
  const other = counting('egress_other_port');
  await new Promise((resolve) => other.listen(0, allowedIp, resolve));
  const denied = counting('egress_denied');
  const deniedIp = await listenSomewhere(denied, 0, taken);
  const rebind = counting('egress_rebind');
  const rebindIp = await listenSomewhere(rebind, 0, taken);
  const literal = counting('egress_literal');
  const literalIp = await listenSomewhere(literal, 0, taken);
  const dns = dgram.createSocket('udp4');
  dns.on('message', (msg, from) => {
    const { name, end } = queryName(msg);
    if (name.endsWith('.exfil.test')) counts.dns += 1;
    // NXDOMAIN, the question echoed: the asker stops at once.
    const answer = Buffer.concat([msg.subarray(0, 2), Buffer.from([0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 0]), msg.subarray(12, end)]);
    dns.send(answer, from.port, from.address);
  });
  let dnsIp;
  for (let i = 0; !dnsIp && i < 200; i++) {
    const ip = `127.0.0.${crypto.randomInt(40, 240)}`;
    if (taken.has(ip)) continue;
    dnsIp = await new Promise((resolve) => {
      dns.once('error', () => resolve(undefined));
      dns.bind(53, ip, () => resolve(ip));
    });
  }
  if (!dnsIp) throw new Error('no 127.0.0.x address for the DNS counter');
  const dir = path.join(base, 'egress');
  fs.mkdirSync(dir);
  const hosts = path.join(dir, 'hosts');
  fs.writeFileSync(hosts, [
    '127.0.0.1 localhost',
    `${allowedIp} allowed.test`,
    `${deniedIp} denied.test unlisted.test`,
    `${rebindIp} rebind.test`,
    '',
  ].join('\n'));
  const resolv = path.join(dir, 'resolv.conf');
  fs.writeFileSync(resolv, `nameserver ${dnsIp}\noptions timeout:1 attempts:1\n`);
  for (const f of [dir, hosts, resolv]) fs.chmodSync(f, 0o755);
  const port = (s) => String(s.address().port);
  const vars = {
    ALLOWED_IP: allowedIp,
    ALLOWED_PORT: port(allowed),
    ALLOWED_BODY: body,
    ALLOWED_OTHER_PORT: port(other),
    DENIED_IP: deniedIp,
    DENIED_PORT: port(denied),
    REBIND_PORT: port(rebind),
    LITERAL_IP: literalIp,
    LITERAL_PORT: port(literal),
    LITERAL_DECIMAL: String(literalIp.split('.').reduce((n, b) => n * 256 + Number(b), 0)),
    DNS_IP: dnsIp,
    ALLOWED_TLS: tls ? 'yes' : undefined,
  };
  const close = () => {
    for (const s of servers) s.close();
    dns.close();
  };
  return { vars, counts: () => ({ ...counts }), close, hosts, resolv };
}

// The table's fixture with the egress servers beside the harness's own sockets.
export async function egressFixture() {
  const f = await fixture();
  const e = await egressServers(f.dirs.base);
  Object.assign(f.vars, e.vars);
  f.egress = e;
  const counts = f.listeners.counts;
  const close = f.listeners.close;
  f.listeners.counts = () => ({ ...counts(), ...e.counts() });
  f.listeners.close = () => {
    close();
    e.close();
  };
  return f;
}

// `bin args` in a mount namespace of its own whose /etc/hosts and /etc/resolv.conf are the
// fixture's: the command line for serveInGroup or spawn.
export function inNames(f, bin, args) {
  const script = `mount --bind ${f.egress.hosts} /etc/hosts && mount --bind ${f.egress.resolv} /etc/resolv.conf && exec "$@"`;
  return ['unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', bin, ...args]];
}

// capfs with the policy as its flags: the allowed name pinned to its address, rebind.test left
// to the resolver (the hosts file, as DNS would answer), denied.test denied.
export function capfsEgressTarget(f) {
  if (!CAPFS_BIN) return null;
  const v = f.vars;
  const token = `tok-${f.secret}`;
  return new WireTarget('capfs', {
    rootOwner: EXEC_UID,
    headers: { authorization: `Bearer ${token}` },
    sandbox: () => null,
    launch: () => {
      const policy = [
        '--exec-allow-host', `allowed.test:${v.ALLOWED_PORT}`,
        '--exec-allow-host', 'allowed.test:443',
        '--exec-allow-host', `rebind.test:${v.REBIND_PORT}`,
        '--exec-deny-host', 'denied.test:*',
        '--exec-resolve', `allowed.test:*:${v.ALLOWED_IP}`,
      ];
      const args = ['serve', '--listen', 'ws://127.0.0.1:0', '--root', f.dirs.root, '--read-only', f.dirs.ro, '--exec', '--exec-user', `${EXEC_UID}:${EXEC_UID}`, ...policy];
      const [bin, full] = inNames(f, CAPFS_BIN, args);
      return serveInGroup(bin, full, { cwd: f.dirs.out, env: { CAPFS_TOKEN: token } });
    },
  });
}

// What codex sends as `networkProxy` for the same policy. Its proxy refuses a name that
// resolves to a loopback or private address unless `allowLocalBinding`, and every test server
// is on loopback: without it the allowed host cannot be reached at all, so it is on, except in
// the one column that shows what codex's default holds and costs (`local: false`).
export function codexNetworkProxy({ local = true } = {}) {
  return {
    proxy: {
      enabled: true,
      enableSocks5: true,
      enableSocks5Udp: false,
      allowUpstreamProxy: false,
      dangerouslyAllowAllUnixSockets: false,
      mode: 'full',
      domains: { 'allowed.test': 'allow', 'rebind.test': 'allow', 'denied.test': 'deny' },
      unixSockets: null,
      allowLocalBinding: local,
    },
  };
}

// codex's own exec-server of `pkg`, without a sandbox (`null`) or with the workspace-write
// context, every start carrying the managed network.
export function codexEgressTarget(f, pkg, mode, { local = true } = {}) {
  const home = codexScratch(`codex-egress-${pkg.version}-${mode}`);
  let shared;
  return new WireTarget(`codex ${pkg.version} ${mode}${local ? '' : ' no-local'}`, {
    rootOwner: 0,
    sandbox: () => (mode === 'workspace-write' ? workspaceWriteSandbox(f.dirs.root) : null),
    managed: () => ({ enforceManagedNetwork: true, networkProxy: codexNetworkProxy({ local }) }),
    launch: async () => {
      if (shared && alive(shared.pid)) return shared;
      const [bin, args] = inNames(f, pkg.native, ['exec-server', '--listen', 'ws://127.0.0.1:0']);
      shared = await serveInGroup(bin, args, { cwd: f.dirs.out, env: { CODEX_HOME: home, CAPFS_TOKEN: `tok-${f.secret}` } });
      return shared;
    },
  });
}

// sandbox-runtime's CLI from the pinned package, when it and bubblewrap are here.
export function srtCli() {
  const cli = path.join(import.meta.dirname, 'node_modules', '@anthropic-ai', 'sandbox-runtime', 'dist', 'cli.js');
  if (!fs.existsSync(cli)) return null;
  const found = (name) => (process.env.PATH ?? '').split(':').some((d) => d && fs.existsSync(path.join(d, name)));
  if (!found('bwrap') || !found('socat')) return null;
  return cli;
}

// sandbox-runtime: one `srt -c COMMAND` per case, as root (it runs commands as its caller), with
// a settings file holding the same policy. Its proxy refuses a name that resolves to loopback
// unless that address is listed as well, so the allowed address is, on the allowed ports.
export function srtTarget(f) {
  const cli = srtCli();
  if (!cli) return null;
  const v = f.vars;
  const settings = path.join(f.dirs.base, 'egress', 'srt-settings.json');
  fs.writeFileSync(settings, JSON.stringify({
    network: {
      allowedDomains: [`allowed.test:${v.ALLOWED_PORT}`, 'allowed.test:443', `${v.ALLOWED_IP}:${v.ALLOWED_PORT}`, `${v.ALLOWED_IP}:443`, `rebind.test:${v.REBIND_PORT}`],
      deniedDomains: ['denied.test'],
    },
    filesystem: { denyRead: [], allowWrite: [f.dirs.root], denyWrite: [] },
  }));
  return {
    name: 'srt',
    rootOwner: 0,
    async run({ argv, cwd, vars, deadlineMs }) {
      vars.SERVER_PID = String(process.pid);
      vars.SERVER_PORT = '0';
      // srt takes one command string; the case's shell is kept by running it as argv.
      const command = argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
      const [bin, args] = inNames(f, process.execPath, [cli, '-s', settings, '-c', command]);
      return runGrouped(bin, args, { cwd, deadlineMs });
    },
    stop() {},
  };
}

// Every egress target this machine has: capfs, each codex without a sandbox and in
// workspace-write, the newer codex in workspace-write with `allowLocalBinding` off (its
// default), and srt.
export function egressTargets(f) {
  const codex = CODEX_PACKAGES.flatMap((pkg) => ['null', 'workspace-write'].map((mode) => codexEgressTarget(f, pkg, mode)));
  const strict = codexEgressTarget(f, CODEX_PACKAGES.at(-1), 'workspace-write', { local: false });
  return [capfsEgressTarget(f), ...codex, strict, srtTarget(f)].filter(Boolean);
}

// The egress table on `targets`.
export function playEgress(targets, f, { only } = {}) {
  return playAll(targets, f, { only, table: EGRESS });
}

if (process.argv[1] === import.meta.filename) {
  const f = await egressFixture();
  const ts = egressTargets(f);
  try {
    const only = process.env.ESCAPES_ONLY ? new RegExp(process.env.ESCAPES_ONLY) : undefined;
    console.log(format(ts, await playEgress(ts, f, { only })));
  } finally {
    for (const t of ts) t.stop();
    f.listeners.close();
    fs.rmSync(f.dirs.base, { recursive: true, force: true });
  }
}
