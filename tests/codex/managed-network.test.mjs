// A real codex turn with codex's managed network, capfs serve --exec as its executor: each
// pinned codex (0.169.0 and 0.171.0), configured with a permission profile whose network
// allows allowed.test and denies denied.test (`[permissions.workspace.network]`, turned on by
// `features.network_proxy`), sends that policy in `process/start` (`enforceManagedNetwork`,
// `networkProxy`) to capfs, which advertises `networkProxyLaunch` and holds it as a narrowing
// of its own policy. The operator allows both names here, so that only codex's deny can refuse
// the second: the model's first command fetches from allowed.test and gets the body, its
// second fetches from denied.test and is refused by capfs's proxy, which the server behind that
// name never sees. Both servers listen on 127.0.0.x; capfs reaches them by `--exec-resolve`.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { CAPFS_BIN, CODEX_PACKAGES, codexExec, codexScratch, scratch, scriptedModel, serveInGroup } from './lib.mjs';
import { listenSomewhere } from './escapes-egress.mjs';

const UID = 65534;
const servesProcesses = execFileSync(CAPFS_BIN, ['serve', '--help'], { encoding: 'utf8' }).includes('--exec-allow-host');

// codex's configuration for the turn: a permission profile (codex's `-s` would replace it, so
// none is given) whose network is codex's managed one, and the feature that starts it.
const PROFILE = [
  '[permissions.workspace.filesystem]',
  '":minimal" = "read"',
  '[permissions.workspace.filesystem.":project_roots"]',
  '"." = "write"',
  '[permissions.workspace.network]',
  'enabled = true',
  'mode = "full"',
  // The test's hosts are on loopback: off (codex's default), capfs refuses them as codex's own
  // proxy would.
  'allow_local_binding = true',
  '[permissions.workspace.network.domains]',
  '"allowed.test" = "allow"',
  '"denied.test" = "deny"',
  '[features]',
  'network_proxy = true',
];

// What codex sent back to the model for each call, by call id.
function toolOutputs(requests) {
  const outputs = new Map();
  for (const item of requests.at(-1)?.input ?? []) {
    if (item.type === 'function_call_output') outputs.set(item.call_id, typeof item.output === 'string' ? item.output : JSON.stringify(item.output));
  }
  return outputs;
}

for (const pkg of CODEX_PACKAGES) {
  describe(`codex ${pkg.version}: a turn with codex's managed network through capfs serve --exec`, { skip: !servesProcesses && 'this capfs binary has no egress policy' }, () => {
    const hits = { allowed: 0, denied: 0 };
    const body = `managed-allowed-${process.pid}`;
    let dir, server, run, outputs, audit, allowed, denied;

    before(async () => {
      const taken = new Set(['127.0.0.1']);
      allowed = http.createServer((req, res) => {
        hits.allowed += 1;
        res.end(`${body}\n`);
      });
      const allowedIp = await listenSomewhere(allowed, 0, taken);
      denied = http.createServer((req, res) => {
        hits.denied += 1;
        res.end('denied body\n');
      });
      const deniedIp = await listenSomewhere(denied, 0, taken);
      const [ap, dp] = [allowed.address().port, denied.address().port];
      dir = scratch('managed');
      const ws = path.join(dir, 'ws');
      fs.mkdirSync(ws);
      fs.chownSync(ws, UID, UID);
      audit = path.join(dir, 'audit.log');
      // The operator allows both names: codex's deny is what must refuse the second.
      server = await serveInGroup(CAPFS_BIN, ['serve', '--listen', 'ws://127.0.0.1:0', '--root', ws, '--exec', '--exec-user', `${UID}:${UID}`,
        '--exec-allow-host', `allowed.test:${ap}`, '--exec-resolve', `allowed.test:${ap}:${allowedIp}`,
        '--exec-allow-host', `denied.test:${dp}`, '--exec-resolve', `denied.test:${dp}:${deniedIp}`,
        '--audit-log', audit]);
      const shell = (cmd) => [{ call: 'exec_command', args: { cmd, yield_time_ms: 10_000 } }];
      const model = await scriptedModel([
        shell(`curl -sS http://allowed.test:${ap}/; echo allowed-rc=$?`),
        shell(`curl -sS http://denied.test:${dp}/; echo denied-rc=$?`),
        [{ say: 'done' }],
      ]);
      try {
        const environments = ['default = "capfs"', 'include_local = false', '[[environments]]', 'id = "capfs"', `url = "${server.url}"`, ''].join('\n');
        run = await codexExec({
          home: codexScratch('managed-home'),
          model,
          environments,
          cwd: ws,
          sandbox: null,
          prompt: 'go',
          bin: pkg.bin,
          top: ['default_permissions = "workspace"'],
          config: PROFILE,
        });
        outputs = toolOutputs(model.requests);
        run.requests = model.requests.length;
      } finally {
        model.close();
      }
    });

    after(() => {
      server?.stop();
      allowed?.close();
      denied?.close();
    });

    test('codex took capfs as an executor of its managed network', () => {
      assert.match(run.output, new RegExp(`OpenAI Codex v${pkg.version.replaceAll('.', '\\.')}\\b`), 'the pinned version ran');
      assert.doesNotMatch(run.output, /does not support executor-local network proxy launches/);
      assert.equal(run.requests, 3, `codex stopped early:\n${run.output}`);
    });

    test('the command fetching from the allowed host got its body', () => {
      const out = outputs.get('call-1-0') ?? '';
      assert.match(out, new RegExp(`${body}\\nallowed-rc=0`), out);
      assert.equal(hits.allowed, 1);
    });

    test("the command fetching from the host codex denies was refused by capfs's proxy", () => {
      const out = outputs.get('call-2-0') ?? '';
      assert.match(out, /capfs egress: denied\.test:\d+: denied/, out);
      assert.doesNotMatch(out, /denied body/, out);
      assert.equal(hits.denied, 0);
    });

    test('both connections are in the audit log, one allowed and one refused', () => {
      const egress = fs.readFileSync(audit, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((l) => l.method === 'egress');
      assert.deepEqual(egress.map((l) => [l.host, l.outcome]), [['allowed.test', 'ok'], ['denied.test', 'refused']]);
      assert.equal(egress[1].reason, 'denied');
    });
  });
}
