// The real codex CLI running its commands through `capfs serve --exec`: each command's effect is
// checked on disk and in what codex sent the model, a command trying to leave the root reads
// nothing outside it, and the server's own environment never reaches a command.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { capfsServe, codexExec, scratch, scriptedModel, sentText } from './lib.mjs';

let dir, ws, outside, server;

before(async () => {
  dir = scratch('processes');
  fs.chmodSync(dir, 0o755);
  ws = path.join(dir, 'ws');
  outside = path.join(dir, 'outside');
  fs.mkdirSync(ws);
  fs.chmodSync(ws, 0o777);
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'canary.txt'), 'canary-9d1e\n');
  fs.chmodSync(path.join(outside, 'canary.txt'), 0o644);
  server = await capfsServe(['--root', ws, '--exec', '--exec-user', '65534'], { SERVER_SECRET: 'secret-4b2a' });
});

after(() => {
  server?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('codex runs its commands through capfs, confined to the root', async () => {
  const model = await scriptedModel([
    [{ call: 'exec_command', args: { cmd: 'echo marker-$((6*7)); echo made > made.txt' } }],
    [{ call: 'exec_command', args: { cmd: 'cat ../outside/canary.txt; echo x > ../outside/new.txt; printenv' } }],
    [{ say: 'done' }],
  ]);
  const home = scratch('home');
  try {
    const run = await codexExec({ home, model, executor: server.url, cwd: ws, sandbox: 'workspace-write', prompt: 'go' });
    const sent = sentText(model.requests);
    assert.equal(model.requests.length, 3, `every scripted step was answered:\n${run.output}`);
    assert.ok(sent.includes('marker-42'), `the command's output reached the model:\n${run.output}`);
    assert.equal(fs.readFileSync(path.join(ws, 'made.txt'), 'utf8'), 'made\n');
    assert.ok(!sent.includes('canary-9d1e'), 'the command read outside its root');
    assert.ok(!fs.existsSync(path.join(outside, 'new.txt')), 'the command wrote outside its root');
    assert.equal(fs.readFileSync(path.join(outside, 'canary.txt'), 'utf8'), 'canary-9d1e\n');
    assert.ok(!sent.includes('secret-4b2a'), "the server's environment reached a command");
  } finally {
    model.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
});
