// The executors the escape table is played against, each started on demand per network policy
// and root layout: capfs `serve --exec`, codex's own `codex exec-server` (no sandbox, and the
// sandbox codex asks for in workspace-write), and landrun. Every one runs a case the same way:
// `run(argv, cwd)` resolves with whether the start was refused, the output and the exit.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { CAPFS_BIN, CODEX_NATIVE_BIN, codexScratch, peer, serveInGroup } from './lib.mjs';
import { EXEC_UID, alive, runGrouped, until } from './escapes-fixture.mjs';

// What codex 0.169 sends for an `exec_command` in workspace-write mode, seen on the wire: the
// environment overlay and policy, and the restricted file-system context.
const CODEX_ENV = { LC_ALL: 'C.UTF-8', LC_CTYPE: 'C.UTF-8', NO_COLOR: '1', TERM: 'dumb', PAGER: 'cat', GIT_PAGER: 'cat', GH_PAGER: 'cat', CODEX_CI: '1' };
const CODEX_ENV_POLICY = { inherit: 'all', ignoreDefaultExcludes: true, exclude: ['CODEX_PERMISSION_PROFILE', 'CODEX_VERSION'], set: {}, includeOnly: [] };

export function workspaceWriteSandbox(root) {
  const special = (kind, subpath) => ({ type: 'special', value: subpath ? { kind, subpath } : { kind } });
  const skip = (subpath) => ({ path: special('project_roots', subpath), access: 'read', missing_path_behavior: 'skip' });
  return {
    permissions: {
      type: 'managed',
      file_system: {
        type: 'restricted',
        entries: [
          { path: special('root'), access: 'read' },
          { path: special('project_roots'), access: 'write' },
          { path: special('slash_tmp'), access: 'write' },
          { path: special('tmpdir'), access: 'write' },
          skip('.git'),
          skip('.agents'),
          skip('.codex'),
        ],
      },
      network: 'restricted',
    },
    cwd: `file://${root}`,
    workspaceRoots: [`file://${root}`],
    windowsSandboxLevel: 'disabled',
    windowsSandboxProxySettingsMode: 'reconcile',
    useLegacyLandlock: false,
  };
}

// One executor over the exec-server protocol. `launch(network, roots)` starts a server for
// that policy and layout; `sandbox` is what each process/start carries, and `managed` the
// managed network fields (`enforceManagedNetwork`, `networkProxy`) when the target has one.
export class WireTarget {
  constructor(name, { launch, sandbox, headers, rootOwner, managed }) {
    Object.assign(this, { name, launch, sandbox, headers, rootOwner, managed, servers: new Map(), next: 0 });
  }

  // The server for a case's policy and layout, started (or restarted, if a case killed it)
  // on demand; `null` when this executor cannot serve that layout (capfs refusing nested roots).
  async server(network, roots) {
    const key = `${network}/${roots}`;
    const known = this.servers.get(key);
    if (known && (known.refused || alive(known.pid))) return known;
    let s;
    try {
      s = await this.launch(network, roots);
    } catch (e) {
      s = { refused: String(e.message).slice(0, 300) };
      this.servers.set(key, s);
      return s;
    }
    const routes = new Map();
    s.routes = routes;
    s.peer = await peer(s.url, {
      headers: this.headers,
      onNotification: (m) => routes.get(m.params?.processId)?.(m),
    });
    const init = await s.peer.request('initialize', { clientName: 'escapes' });
    if (!init.result) throw new Error(`${this.name}: initialize: ${JSON.stringify(init)}`);
    s.peer.notify('initialized', {});
    this.servers.set(key, s);
    return s;
  }

  // Runs `argv` in `cwd`; `onOutput` sees the output so far and may call `terminate`.
  async run({ argv, cwd, network, roots, vars, deadlineMs, onOutput }) {
    const s = await this.server(network, roots);
    if (s.refused) return { refused: `server: ${s.refused}` };
    vars.SERVER_PID = String(s.pid);
    vars.SERVER_PORT = String(s.port);
    argv = argv.map((a) => a.replaceAll('{SERVER_PID}', vars.SERVER_PID).replaceAll('{SERVER_PORT}', vars.SERVER_PORT));
    const processId = `esc-${process.pid}-${this.next++}`;
    let output = '';
    let exitCode = null;
    let closed = false;
    s.routes.set(processId, (m) => {
      if (m.method === 'process/output') output += Buffer.from(m.params.chunk, 'base64').toString('latin1');
      else if (m.method === 'process/exited') exitCode = m.params.exitCode;
      else if (m.method === 'process/closed') closed = true;
    });
    const terminate = () => s.peer.request('process/terminate', { processId }).catch(() => {});
    try {
      const reply = await s.peer.request('process/start', {
        processId,
        metadata: null,
        argv,
        cwd: `file://${cwd}`,
        env: CODEX_ENV,
        envPolicy: CODEX_ENV_POLICY,
        tty: false,
        pipeStdin: false,
        arg0: null,
        sandbox: this.sandbox(vars),
        enforceManagedNetwork: false,
        managedNetwork: null,
        ...this.managed?.(vars),
      });
      if (reply.error) return { refused: reply.error.message };
      let asked = false;
      const done = await until(() => {
        if (!asked && onOutput?.(output)) {
          asked = true;
          terminate();
        }
        return closed || !alive(s.pid);
      }, deadlineMs);
      if (!done) await terminate();
      return { output, exitCode, timedOut: !done };
    } catch (e) {
      // A server a case killed answers nothing more.
      return { output, exitCode, error: e.message };
    } finally {
      s.routes.delete(processId);
    }
  }

  stop() {
    for (const s of this.servers.values()) {
      s.peer?.close();
      if (s.pid && alive(s.pid)) s.stop();
    }
  }
}

// capfs `serve --exec`, when the binary has it: one server per policy and layout.
export function capfsTarget(f) {
  if (!CAPFS_BIN) return null;
  const help = execFileSync(CAPFS_BIN, ['serve', '--help'], { encoding: 'utf8' });
  if (!help.includes('--exec')) return null;
  const token = `tok-${f.secret}`;
  return new WireTarget('capfs', {
    rootOwner: EXEC_UID,
    headers: { authorization: `Bearer ${token}` },
    sandbox: () => null,
    launch: (network, roots) => {
      const layout = roots === 'nested'
        ? ['--root', f.dirs.root, '--read-only', path.join(f.dirs.root, 'nested-ro')]
        : ['--root', f.dirs.root, '--read-only', f.dirs.ro];
      const args = ['serve', '--listen', 'ws://127.0.0.1:0', ...layout, '--exec', '--exec-network', network, '--exec-user', `${EXEC_UID}:${EXEC_UID}`];
      return serveInGroup(CAPFS_BIN, args, { cwd: f.dirs.out, env: { CAPFS_TOKEN: token } });
    },
  });
}

// codex's own exec-server: `sandbox: null` runs commands as they are; `workspace-write` sends
// the context codex sends in that mode. It serves no roots of its own, so the layout and the
// network policy change nothing; one server serves every case.
export function codexTarget(f, mode) {
  // Outside the base: codex keeps its helpers in its home, and not under the temporary directory.
  const home = codexScratch(`codex-home-${mode}`);
  let shared;
  return new WireTarget(`codex ${mode}`, {
    // codex runs commands as itself, root here: its sandbox needs the root to be root's.
    rootOwner: 0,
    sandbox: () => (mode === 'workspace-write' ? workspaceWriteSandbox(f.dirs.root) : null),
    launch: async () => {
      if (shared && alive(shared.pid)) return shared;
      shared = await serveInGroup(CODEX_NATIVE_BIN, ['exec-server', '--listen', 'ws://127.0.0.1:0'], {
        cwd: f.dirs.out,
        env: { CODEX_HOME: home, CAPFS_TOKEN: `tok-${f.secret}` },
      });
      return shared;
    },
  });
}

// landrun (`LANDRUN` names it; absent, no column): the same roots as Landlock rules, run as the
// same uid capfs uses, with a system set like capfs's. It has no server: a stand-in process
// with the secret in its environment and its cwd in the canary tree, listening for WebSockets,
// plays the executor for the cases that aim at one.
export function landrunTarget(f) {
  const bin = process.env.LANDRUN;
  if (!bin) return null;
  const system = ['--rox', '/usr', '--rox', '/bin', '--rox', '/sbin', '--rox', '/lib', '--rox', '/lib64',
    '--ro', '/etc/ld.so.cache', '--ro', '/etc/passwd', '--ro', '/etc/group', '--ro', '/etc/nsswitch.conf',
    '--ro', '/etc/alternatives', '--rw', '/dev/null', '--ro', '/dev/urandom', '--ro', '/dev/zero', '--ro', '/proc'];
  let standIn;
  const standInScript = "const {WebSocketServer}=require('ws');const s=new WebSocketServer({host:'127.0.0.1',port:0});s.on('listening',()=>console.log('ws://127.0.0.1:'+s.address().port));";
  const target = {
    name: 'landrun',
    rootOwner: EXEC_UID,
    async run({ argv, cwd, network, roots, vars, deadlineMs, onOutput }) {
      if (!standIn || !alive(standIn.pid)) {
        standIn = await serveInGroup(process.execPath, ['-e', standInScript], {
          cwd: f.dirs.out,
          env: { NODE_PATH: path.join(import.meta.dirname, 'node_modules'), CAPFS_TOKEN: `tok-${f.secret}` },
        });
      }
      vars.SERVER_PID = String(standIn.pid);
      vars.SERVER_PORT = String(standIn.port);
      argv = argv.map((a) => a.replaceAll('{SERVER_PID}', vars.SERVER_PID).replaceAll('{SERVER_PORT}', vars.SERVER_PORT));
      const layout = roots === 'nested'
        ? ['--rwx', f.dirs.root, '--rox', path.join(f.dirs.root, 'nested-ro')]
        : ['--rwx', f.dirs.root, '--rox', f.dirs.ro];
      // Landlock's network rules name ports, not addresses: "loopback" can only be the ports
      // the harness listens on.
      const net = { none: [], all: ['--unrestricted-network'] }[network] ?? ['--connect-tcp', vars.PORT];
      // landrun gives no temporary directory of its own: one in the base stands for it.
      const tmp = path.join(f.dirs.base, 'landrun-tmp');
      fs.mkdirSync(tmp, { recursive: true, mode: 0o777 });
      fs.chmodSync(tmp, 0o777);
      const env = ['PATH=/usr/local/bin:/usr/bin:/bin', 'HOME=/nonexistent', 'LANG=C.UTF-8', `TMPDIR=${tmp}`].flatMap((e) => ['--env', e]);
      const full = ['--reuid', String(EXEC_UID), '--regid', String(EXEC_UID), '--clear-groups', '--',
        bin, '--best-effort', ...system, '--rw', tmp, ...layout, ...net, ...env, '--', ...argv];
      // landrun leaves process groups alone: ending it ends the group it was started in.
      return runGrouped('setpriv', full, { cwd, deadlineMs, stopWhen: onOutput });
    },
    stop() {
      if (standIn && alive(standIn.pid)) standIn.stop();
    },
  };
  return target;
}
