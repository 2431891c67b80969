// The real codex CLI running commands through an executor: its `exec_command` and
// `write_stdin` tools, driven by a scripted model, against capfs `serve --exec` and, as the
// reference the script is checked on, codex's own `codex exec-server`. Each step is judged by
// what codex sent the model and by the disk, never by codex's exit status.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { CAPFS_BIN, CODEX_NATIVE_BIN, codexExec, codexScratch, scratch, scriptedModel, serveInGroup } from './lib.mjs';
import { EXEC_UID } from './escapes-fixture.mjs';

const servesProcesses = execFileSync(CAPFS_BIN, ['serve', '--help'], { encoding: 'utf8' }).includes('--exec');

// The output codex returned the model for its last tool call.
function lastToolOutput(requests) {
  const input = requests.at(-1).input;
  const outputs = input.filter((item) => item.type === 'function_call_output');
  return String(outputs.at(-1)?.output ?? '');
}

const executors = [
  {
    name: 'capfs serve --exec',
    skip: !servesProcesses && 'this capfs binary does not serve processes',
    confines: true,
    // The sandbox runs commands as EXEC_UID: the workspace is that uid's.
    owner: EXEC_UID,
    start: (ws) => serveInGroup(CAPFS_BIN, ['serve', '--listen', 'ws://127.0.0.1:0', '--root', ws, '--exec', '--exec-user', `${EXEC_UID}:${EXEC_UID}`]),
  },
  {
    name: 'codex exec-server',
    skip: false,
    confines: false,
    // codex runs commands as itself (root here), and its sandbox needs the workspace to be its.
    owner: 0,
    start: () => serveInGroup(CODEX_NATIVE_BIN, ['exec-server', '--listen', 'ws://127.0.0.1:0'], { env: { CODEX_HOME: codexScratch('exec-server-home') } }),
  },
];

for (const ex of executors) {
  describe(`codex running commands through ${ex.name}`, { skip: ex.skip }, () => {
    let dir, ws, outside, server;
    // codex's home for each turn, removed with the rest.
    const homes = { made: [], make: () => homes.made[homes.made.push(codexScratch('home')) - 1] };

    before(async () => {
      dir = scratch('proc');
      ws = path.join(dir, 'ws');
      outside = path.join(dir, 'outside');
      fs.mkdirSync(ws);
      fs.mkdirSync(outside, { mode: 0o777 });
      // World-writable, so that only the sandbox can keep a write out.
      fs.chmodSync(outside, 0o777);
      fs.writeFileSync(path.join(outside, 'canary.txt'), 'canary\n', { mode: 0o666 });
      fs.writeFileSync(path.join(ws, 'hello.txt'), 'hello from the workspace 5e1d\n');
      for (const p of [ws, path.join(ws, 'hello.txt')]) fs.chownSync(p, ex.owner, ex.owner);
      server = await ex.start(ws);
    });

    after(() => {
      server?.stop();
      for (const d of [dir, ...homes.made]) if (d) fs.rmSync(d, { recursive: true, force: true });
    });

    test('exec_command returns the file to the model', async () => {
      const model = await scriptedModel([[{ call: 'exec_command', args: { cmd: 'cat hello.txt' } }], [{ say: 'done' }]]);
      try {
        const run = await codexExec({ home: homes.make(), model, executor: server.url, cwd: ws, sandbox: 'workspace-write', prompt: 'go' });
        assert.equal(model.requests.length, 2, run.output);
        const out = lastToolOutput(model.requests);
        assert.match(out, /hello from the workspace 5e1d/, out);
        assert.match(out, /exited with code 0/, out);
      } finally {
        model.close();
      }
    });

    test('write_stdin reaches a command on a terminal', async () => {
      // The session id codex gives the model is the one in its answer to exec_command.
      const session = (requests) => Number(/session ID (\d+)/.exec(lastToolOutput(requests))?.[1]);
      const model = await scriptedModel([
        [{ call: 'exec_command', args: { cmd: 'read x; echo got:$x', tty: true, yield_time_ms: 1000 } }],
        (requests) => [{ call: 'write_stdin', args: { session_id: session(requests), chars: 'abc\n', yield_time_ms: 5000 } }],
        [{ say: 'done' }],
      ]);
      try {
        const run = await codexExec({ home: homes.make(), model, executor: server.url, cwd: ws, sandbox: 'workspace-write', prompt: 'go' });
        assert.equal(model.requests.length, 3, run.output);
        assert.match(lastToolOutput(model.requests.slice(0, 2)), /session ID \d+/, 'the command was still running, waiting for input');
        const out = lastToolOutput(model.requests);
        assert.match(out, /got:abc/, out);
      } finally {
        model.close();
      }
    });

    // In full-access mode codex asks for no sandbox at all: only an executor that confines by
    // itself (capfs) holds there, so codex's own is checked in workspace-write alone.
    const modes = ex.confines ? ['workspace-write', 'danger-full-access'] : ['workspace-write'];
    for (const sandbox of modes) test(`in ${sandbox} mode a command writing outside the workspace is refused`, async () => {
      const target = path.join(outside, `planted-${sandbox}.txt`);
      const model = await scriptedModel([
        [{ call: 'exec_command', args: { cmd: `echo planted > ${target}; echo pwned >> ${path.join(outside, 'canary.txt')}; echo status:$?` } }],
        [{ say: 'done' }],
      ]);
      try {
        const run = await codexExec({ home: homes.make(), model, executor: server.url, cwd: ws, sandbox, prompt: 'go' });
        assert.equal(model.requests.length, 2, run.output);
        const out = lastToolOutput(model.requests);
        // The command ran, and its writes failed.
        assert.match(out, /status:[1-9]/, out);
        assert.ok(!fs.existsSync(target), 'nothing was planted outside the workspace');
        assert.deepEqual(fs.readdirSync(outside), ['canary.txt']);
        assert.equal(fs.readFileSync(path.join(outside, 'canary.txt'), 'utf8'), 'canary\n');
      } finally {
        model.close();
      }
    });
  });
}
