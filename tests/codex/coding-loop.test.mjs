// One whole coding turn of the real codex CLI through capfs `serve --exec` as ONE unprivileged
// identity: apply_patch and the shell take turns on the same files (a patch adds a file the
// shell edits, the shell makes a file a patch updates, both write into a directory a patch
// made), git commits the lot, a background process is left behind, and a write outside is
// tried. Each pinned codex version (0.169.0 and 0.171.0) plays it against capfs started as
// root with `--user 65534:65534`, against capfs started as the ordinary user 65534 itself, and
// against its own `codex exec-server` (as root, in codex's sandbox), the reference the script is
// checked on. Each step is judged by what codex sent back to the model and by the disk, never
// by codex's exit status: the bytes of each file, every entry of the workspace owned by the one
// identity, modes from umask 022, the background process gone when the turn ended, the canary
// tree outside unchanged.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { CAPFS_BIN, CODEX_PACKAGES, codexExec, codexScratch, scratch, scriptedModel, serveInGroup } from './lib.mjs';
import { changes, sleepers, snapshot, until } from './escapes-fixture.mjs';

const UID = 65534;
const help = execFileSync(CAPFS_BIN, ['serve', '--help'], { encoding: 'utf8' });
const servesProcesses = help.includes('--exec');
// `--user` names the one identity the whole server takes; a binary that has only the older
// `--exec-user` (the same flag's alias) is given that, so that the rest is still checked.
const USER_FLAG = /--user\b/.test(help) ? '--user' : '--exec-user';

// The server is started with umask 022 whatever the harness's, so that modes are known.
const UMASK = ['/bin/sh', '-c', 'umask 022 && exec "$@"', 'sh'];
const listen = ['serve', '--listen', 'ws://127.0.0.1:0'];

// CAPFS_BIN where uid 65534 can run it: a binary inside a checkout it cannot reach (a 0700
// directory, /root) is copied into the test's directory.
function runnableBy(uid, bin, dir) {
  const probe = spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'test', '-x', bin]);
  if (probe.status === 0) return bin;
  const copy = path.join(dir, 'capfs');
  fs.copyFileSync(bin, copy);
  fs.chmodSync(copy, 0o755);
  return copy;
}

const executors = [
  {
    name: `capfs serve --exec ${USER_FLAG} ${UID}:${UID}, started as root`,
    skip: !servesProcesses && 'this capfs binary does not serve processes',
    owner: UID,
    confines: true,
    gitInit: true,
    start: (ws) => serveInGroup(UMASK[0], [...UMASK.slice(1), CAPFS_BIN, ...listen, '--root', ws, '--exec', USER_FLAG, `${UID}:${UID}`]),
  },
  {
    name: `capfs serve --exec, started as uid ${UID}`,
    skip: !servesProcesses && 'this capfs binary does not serve processes',
    owner: UID,
    confines: true,
    gitInit: true,
    start: (ws, dir) => {
      const bin = runnableBy(UID, CAPFS_BIN, dir);
      const setpriv = ['setpriv', `--reuid=${UID}`, `--regid=${UID}`, '--clear-groups', '--'];
      // The home an ordinary user without one has.
      return serveInGroup(UMASK[0], [...UMASK.slice(1), ...setpriv, bin, ...listen, '--root', ws, '--exec'], { env: { HOME: '/nonexistent' } });
    },
  },
];
// codex runs commands as itself (root here), and its sandbox needs the workspace to be its.
// Its sandbox keeps `.git` read-only in workspace-write mode even before it exists, so there
// `git init` is refused: the reference checks the rest of the script.
const reference = {
  name: 'codex exec-server (the reference)',
  skip: false,
  owner: 0,
  confines: false,
  gitInit: false,
  start: (ws, dir, pkg) => serveInGroup(UMASK[0], [...UMASK.slice(1), pkg.native, 'exec-server', '--listen', 'ws://127.0.0.1:0'], { env: { CODEX_HOME: codexScratch('exec-server-home') } }),
};

const patch = (body) => ({ tool: 'apply_patch', input: `*** Begin Patch\n${body}*** End Patch\n` });
const shell = (cmd) => ({ call: 'exec_command', args: { cmd, yield_time_ms: 10_000 } });

// The turn: each step one tool call, what its output must show, and what it leaves on disk.
function script({ outside, mark, gitInit }) {
  return [
    { what: 'apply_patch adds made.txt', item: patch('*** Add File: made.txt\n+line one\n+line two\n'), shows: /A made\.txt/ },
    { what: 'the shell edits the patched file (sed -i, then >>)', item: shell("sed -i 's/line two/line 2/' made.txt && echo 'line three' >> made.txt && echo edit-status:$?"), shows: /edit-status:0/ },
    { what: 'the shell creates shell.txt', item: shell("printf 'from the shell\\n' > shell.txt && echo create-status:$?"), shows: /create-status:0/ },
    { what: 'apply_patch updates shell.txt', item: patch('*** Update File: shell.txt\n@@\n-from the shell\n+from the shell, patched\n'), shows: /M shell\.txt/ },
    { what: 'apply_patch adds newdir/deep/x.txt', item: patch('*** Add File: newdir/deep/x.txt\n+deep\n'), shows: /A newdir\/deep\/x\.txt/ },
    { what: 'the shell creates a file in newdir/deep', item: shell('echo shell-deep > newdir/deep/y.txt && echo deep-status:$?'), shows: /deep-status:0/ },
    {
      what: 'git init, add and commit by the shell',
      item: shell('git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -q -m m && echo commit-status:$? && git ls-files'),
      shows: gitInit
        ? /commit-status:0\s[\s\S]*made\.txt[\s\S]*newdir\/deep\/x\.txt[\s\S]*newdir\/deep\/y\.txt[\s\S]*shell\.txt/
        : /\.git\/[^']*': Read-only file system/,
    },
    { what: 'a background process is started', item: shell(`sleep ${mark} > /dev/null 2>&1 & echo started-background`), shows: /started-background/ },
    {
      what: 'a write outside the workspace is tried',
      item: shell(`echo pwned >> ${outside}/canary.txt; echo pwned >> ${outside}/owned.txt; touch ${outside}/sub/planted; echo outside-status:$?`),
      shows: /outside-status:[1-9]/,
    },
  ];
}

// What every file must hold when the turn is over.
const BYTES = {
  'made.txt': 'line one\nline 2\nline three\n',
  'shell.txt': 'from the shell, patched\n',
  'newdir/deep/x.txt': 'deep\n',
  'newdir/deep/y.txt': 'shell-deep\n',
};
// The entries the agent made, and their modes under umask 022.
const MODES = { 'made.txt': 0o644, 'shell.txt': 0o644, newdir: 0o755, 'newdir/deep': 0o755, 'newdir/deep/x.txt': 0o644, 'newdir/deep/y.txt': 0o644, '.git': 0o755 };

// Each tool output codex sent the model, by call id, from the last request (it holds them all).
function toolOutputs(requests) {
  const outputs = new Map();
  for (const item of requests.at(-1)?.input ?? []) {
    if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
      const out = item.output;
      outputs.set(item.call_id, typeof out === 'string' ? out : JSON.stringify(out));
    }
  }
  return outputs;
}

// Every entry under `dir` whose owner or group is not `id`, with what it has.
function notOwnedBy(dir, id) {
  const wrong = [];
  const walk = (rel) => {
    const st = fs.lstatSync(path.join(dir, rel));
    if (st.uid !== id || st.gid !== id) wrong.push(`${rel} ${st.uid}:${st.gid}`);
    if (st.isDirectory()) for (const name of fs.readdirSync(path.join(dir, rel)).sort()) walk(path.join(rel, name));
  };
  walk('.');
  return wrong;
}

// The runs: each pinned codex against each capfs mode and against its own exec-server.
const runs = CODEX_PACKAGES.flatMap((pkg) => [...executors, reference].map((ex) => ({ pkg, ex })));

for (const { pkg, ex } of runs) {
  describe(`codex ${pkg.version}: one coding turn through ${ex.name}`, { skip: ex.skip }, () => {
    let dir, ws, outside, server, run, steps, outputs, canary, leftover;
    const mark = `3000.${crypto.randomInt(100000, 999999)}`;

    before(async () => {
      dir = scratch('loop');
      ws = path.join(dir, 'ws');
      outside = path.join(dir, 'outside');
      fs.mkdirSync(ws);
      fs.chownSync(ws, ex.owner, ex.owner);
      // The canary tree: world-writable, and one file the identity owns, so that only the
      // confinement can keep a write out.
      fs.mkdirSync(path.join(outside, 'sub'), { recursive: true });
      fs.chmodSync(outside, 0o777);
      fs.chmodSync(path.join(outside, 'sub'), 0o777);
      fs.writeFileSync(path.join(outside, 'canary.txt'), 'canary\n');
      fs.chmodSync(path.join(outside, 'canary.txt'), 0o666);
      fs.writeFileSync(path.join(outside, 'owned.txt'), 'owned\n');
      fs.chownSync(path.join(outside, 'owned.txt'), UID, UID);
      canary = snapshot(outside);
      server = await ex.start(ws, dir, pkg);
      steps = script({ outside, mark, gitInit: ex.gitInit });
      const model = await scriptedModel([...steps.map((s) => [s.item]), [{ say: 'done' }]]);
      try {
        // codex is pointed at the executor as README's recipe does: environments.toml with the
        // server's URL and no local fallback.
        const environments = ['default = "capfs"', 'include_local = false', '[[environments]]', 'id = "capfs"', `url = "${server.url}"`, ''].join('\n');
        run = await codexExec({ home: codexScratch('home'), model, environments, cwd: ws, sandbox: 'workspace-write', prompt: 'go', bin: pkg.bin });
        outputs = toolOutputs(model.requests);
        run.requests = model.requests.length;
      } finally {
        model.close();
      }
      // The turn is over: anything it left running is looked for while the server still runs.
      leftover = (await until(() => sleepers(mark).length === 0, 5_000)) ? [] : sleepers(mark);
    });

    after(() => {
      server?.stop();
      for (const pid of sleepers(mark)) process.kill(pid, 'SIGKILL');
    });

    test('codex answered every step of the script', () => {
      assert.match(run.output, new RegExp(`OpenAI Codex v${pkg.version.replaceAll('.', '\\.')}\\b`), 'the pinned version ran');
      assert.equal(run.requests, steps.length + 1, `codex stopped early:\n${run.output}`);
    });

    test('each step shows in what codex sent back to the model', (t) => {
      const wrong = [];
      steps.forEach((s, i) => {
        const out = outputs.get(`call-${i + 1}-0`);
        if (out === undefined) wrong.push(`${s.what}: no output`);
        else if (!s.shows.test(out)) wrong.push(`${s.what}: ${out.slice(0, 600)}`);
      });
      if (wrong.length) t.diagnostic(run.output.slice(-3000));
      assert.deepEqual(wrong, []);
    });

    test('every file holds the exact bytes', () => {
      for (const [rel, bytes] of Object.entries(BYTES)) {
        const file = path.join(ws, rel);
        assert.ok(fs.existsSync(file), `${rel} is missing`);
        assert.equal(fs.readFileSync(file, 'utf8'), bytes, rel);
      }
      if (!ex.gitInit) return;
      assert.ok(fs.existsSync(path.join(ws, '.git', 'HEAD')), 'git init left no .git/HEAD');
      // The commit holds the four files: read from the object store, whoever owns it.
      const tree = spawnSync('git', ['-c', 'safe.directory=*', '-C', ws, 'ls-tree', '-r', '--name-only', 'HEAD'], { encoding: 'utf8' });
      assert.deepEqual(tree.stdout.trim().split('\n'), Object.keys(BYTES).sort(), tree.stderr);
    });

    test(`everything in the workspace belongs to ${ex.owner}:${ex.owner}`, () => {
      assert.deepEqual(notOwnedBy(ws, ex.owner), []);
    });

    test('modes follow umask 022', () => {
      const wrong = Object.entries(MODES)
        .filter(([rel]) => fs.existsSync(path.join(ws, rel)))
        .map(([rel, mode]) => [rel, (fs.lstatSync(path.join(ws, rel)).mode & 0o7777).toString(8), mode.toString(8)])
        .filter(([, got, want]) => got !== want)
        .map(([rel, got, want]) => `${rel} ${got} (want ${want})`);
      assert.deepEqual(wrong, []);
    });

    // codex's own exec-server is not held to it: what it did is printed.
    test('the background process is gone when the turn ended', (t) => {
      if (!ex.confines) {
        t.diagnostic(`the reference: sleep ${mark} ${leftover.length ? 'outlived the turn' : 'was gone'}`);
        return;
      }
      assert.deepEqual(leftover, [], `sleep ${mark} outlived the turn`);
    });

    test('the canary tree outside the workspace is unchanged', () => {
      assert.deepEqual(changes(canary, snapshot(outside)), []);
    });
  });
}
