// The executor as deploy/kubernetes/ starts it, serving a real codex turn: the binary runs with
// the exact arguments and environment both manifests give the container (their mount paths and
// listen addresses mapped to this machine's, nothing else changed), as the pod's unprivileged
// user, with the image's PATH. Its probes answer on the admin address the manifests probe; each
// pinned codex (0.169.0 and 0.171.0) reaches it as README's recipe says, the token from the
// manifests' Secret as `auth_bearer_token`, and plays one turn: apply_patch adds a file, the
// shell edits it and reports who it runs as, a write outside the workspace is tried. Then
// SIGTERM drains the server and it exits 0.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { CAPFS_BIN, CODEX_PACKAGES, codexExec, codexScratch, scratch, scriptedModel } from './lib.mjs';
import { changes, snapshot } from './escapes-fixture.mjs';

const MANIFESTS = ['executor.yaml', 'sandbox-template.yaml'].map((name) =>
  fs.readFileSync(path.join(import.meta.dirname, '..', '..', 'deploy', 'kubernetes', name), 'utf8'),
);
// The user and group the manifests run the container as (runAsUser, runAsGroup).
const POD_USER = 65532;
// The PATH of the image deploy/Containerfile builds (debian:bookworm-slim's).
const IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const isRoot = process.getuid() === 0;

// The JSON of the one line of `manifest` that starts with `key: [` (the manifests write the
// container's args and env as JSON flow sequences, which are YAML too).
function flowSequence(manifest, key) {
  const lines = manifest
    .split('\n')
    .map((l) => l.trimStart())
    .filter((l) => l.startsWith(`${key}: [`));
  assert.equal(lines.length, 1, `one \`${key}:\` line`);
  return JSON.parse(lines[0].slice(key.length + 2));
}

// The manifests' container, started on this machine: resolves with its WebSocket and admin
// URLs once it printed both.
async function startAsTheManifestsSay(dir, ws, tokenFile) {
  const args = flowSequence(MANIFESTS[0], 'args');
  const env = flowSequence(MANIFESTS[0], 'env');
  for (const text of MANIFESTS.slice(1)) {
    assert.deepEqual(flowSequence(text, 'args'), args, "the two manifests' args differ");
    assert.deepEqual(flowSequence(text, 'env'), env, "the two manifests' env differ");
  }
  const mapped = args.map(
    (arg) =>
      ({
        'ws://0.0.0.0:7300': 'ws://127.0.0.1:0',
        'http://0.0.0.0:9300': 'http://127.0.0.1:0',
        '/workspace': ws,
        '/run/capfs/token': tokenFile,
      })[arg] ?? arg,
  );
  assert.equal(mapped[0], 'serve');
  // The pod's user runs a copy of the binary beside the workspace, which it can reach wherever
  // the checkout lies.
  const bin = path.join(dir, 'capfs');
  fs.copyFileSync(CAPFS_BIN, bin);
  fs.chmodSync(bin, 0o755);
  const childEnv = { PATH: IMAGE_PATH, HOME: '/nonexistent' };
  for (const { name, value } of env) childEnv[name] = value;
  const command = isRoot
    ? ['setpriv', [`--reuid=${POD_USER}`, `--regid=${POD_USER}`, '--clear-groups', '--', bin, ...mapped]]
    : [bin, mapped];
  const child = spawn(command[0], command[1], { cwd: ws, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const urls = await new Promise((resolve, reject) => {
    const look = (d) => {
      out += d;
      const lines = out.split('\n');
      const url = lines.find((l) => l.startsWith('ws://'));
      const admin = lines.find((l) => l.startsWith('http://'));
      if (url && admin) resolve({ url: url.trim(), admin: admin.trim() });
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.on('exit', (code) => reject(new Error(`capfs exited ${code}: ${out}`)));
  });
  child.removeAllListeners('exit');
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { ...urls, child, exited, output: () => out };
}

function get(base, route, headers = {}) {
  return new Promise((resolve, reject) => {
    http
      .get(`${base}${route}`, { headers }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      })
      .on('error', reject);
  });
}

const patch = (body) => ({ tool: 'apply_patch', input: `*** Begin Patch\n${body}*** End Patch\n` });
const shell = (cmd) => ({ call: 'exec_command', args: { cmd, yield_time_ms: 10_000 } });

for (const pkg of CODEX_PACKAGES) {
  describe(`codex ${pkg.version}: one turn through the executor as deploy/kubernetes starts it`, () => {
    let dir, ws, outside, canary, server, probes, run, outputs, metrics, ended;
    const token = crypto.randomBytes(24).toString('base64url');

    before(async () => {
      dir = scratch('deploy');
      ws = path.join(dir, 'workspace');
      outside = path.join(dir, 'outside');
      fs.mkdirSync(ws);
      fs.mkdirSync(outside);
      fs.chmodSync(outside, 0o777);
      fs.writeFileSync(path.join(outside, 'canary.txt'), 'canary\n');
      fs.chmodSync(path.join(outside, 'canary.txt'), 0o666);
      canary = snapshot(outside);
      // The Secret's key, mounted read-only for the pod's user.
      const tokenFile = path.join(dir, 'token');
      fs.writeFileSync(tokenFile, token, { mode: 0o600 });
      if (isRoot) {
        fs.chownSync(ws, POD_USER, POD_USER);
        fs.chownSync(tokenFile, POD_USER, POD_USER);
      }
      server = await startAsTheManifestsSay(dir, ws, tokenFile);
      probes = {
        health: await get(server.admin, '/healthz'),
        ready: await get(server.admin, '/readyz'),
        metrics: await get(server.admin, '/metrics'),
      };
      const steps = [
        [patch('*** Add File: notes.txt\n+from the patch\n')],
        [shell("echo 'from the shell' >> notes.txt && echo uid:$(id -u) && cat notes.txt")],
        [shell(`echo pwned >> ${outside}/canary.txt; touch ${outside}/planted; echo outside-status:$?`)],
        [{ say: 'done' }],
      ];
      const model = await scriptedModel(steps);
      try {
        const environments = [
          'default = "pod"',
          'include_local = false',
          '[[environments]]',
          'id = "pod"',
          `url = "${server.url}"`,
          `auth_bearer_token = "${token}"`,
          '',
        ].join('\n');
        run = await codexExec({ home: codexScratch('home'), model, environments, cwd: ws, sandbox: 'workspace-write', prompt: 'go', bin: pkg.bin });
        outputs = new Map();
        for (const item of model.requests.at(-1)?.input ?? []) {
          if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
            outputs.set(item.call_id, typeof item.output === 'string' ? item.output : JSON.stringify(item.output));
          }
        }
        run.requests = model.requests.length;
      } finally {
        model.close();
      }
      metrics = await get(server.admin, '/metrics', { authorization: `Bearer ${token}` });
      server.child.kill('SIGTERM');
      ended = await server.exited;
    });

    after(() => {
      if (server && server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
    });

    test('the probes answer where the manifests probe them, without the token', () => {
      for (const text of MANIFESTS) {
        for (const probe of ['path: /healthz', 'path: /readyz', 'port: admin', 'containerPort: 9300']) {
          assert.ok(text.includes(probe), `${probe} missing from a manifest`);
        }
      }
      assert.equal(probes.health.status, 200, probes.health.body);
      assert.equal(probes.ready.status, 200, probes.ready.body);
      assert.equal(probes.metrics.status, 401, probes.metrics.body);
    });

    test('codex played the whole turn on the executor', () => {
      assert.match(run.output, new RegExp(`OpenAI Codex v${pkg.version.replaceAll('.', '\\.')}\\b`), 'the pinned version ran');
      assert.equal(run.requests, 4, `codex stopped early:\n${run.output}`);
      assert.match(outputs.get('call-1-0') ?? '', /A notes\.txt/);
      const edited = outputs.get('call-2-0') ?? '';
      assert.match(edited, isRoot ? new RegExp(`uid:${POD_USER}\\b`) : /uid:\d+/, edited);
      assert.match(edited, /from the patch\s+from the shell/, edited);
      assert.match(outputs.get('call-3-0') ?? '', /outside-status:[1-9]/);
    });

    test("the workspace holds the turn's bytes, owned by the pod's user", () => {
      const file = path.join(ws, 'notes.txt');
      assert.equal(fs.readFileSync(file, 'utf8'), 'from the patch\nfrom the shell\n');
      if (isRoot) assert.equal(fs.statSync(file).uid, POD_USER);
    });

    test('nothing outside the workspace changed', () => {
      assert.deepEqual(changes(canary, snapshot(outside)), []);
    });

    test('the metrics counted the turn, and SIGTERM drained the server to exit 0', () => {
      assert.equal(metrics.status, 200, metrics.body);
      assert.match(metrics.body, /capfs_process_starts_total\S* [1-9]/, metrics.body.slice(0, 2000));
      assert.ok(!metrics.body.includes(token), 'the token reached the metrics');
      assert.deepEqual(ended, { code: 0, signal: null }, server.output().slice(-2000));
      assert.ok(!server.output().includes(token), 'the token reached the log');
    });
  });
}

// setpriv is what drops to the pod's user; without it as root the test cannot play the pod.
if (isRoot && spawnSync('setpriv', ['--version']).status !== 0) throw new Error('setpriv (util-linux) is needed as root');
