// The real codex CLI running its commands through `capfs serve --exec`: each command's effect is
// checked on disk and in what codex sent the model, a command trying to leave the root reads
// nothing outside it, the project's `.git` stays read-only (codex's workspace-write keeps it so)
// while the rest of the project is written, and the server's own environment never reaches a
// command.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { capfsServe, codexExec, codexScratch, scratch, scriptedModel, sentText } from './lib.mjs';

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
  // A repository: codex keeps `.git` read-only inside the writable project. Open to the
  // command's user, so only the confinement can refuse its write.
  fs.mkdirSync(path.join(ws, '.git'));
  fs.chmodSync(path.join(ws, '.git'), 0o777);
  fs.writeFileSync(path.join(ws, '.git', 'HEAD'), 'ref: refs/heads/main\n');
  fs.chmodSync(path.join(ws, '.git', 'HEAD'), 0o666);
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
    [{ call: 'exec_command', args: { cmd: 'echo x > .git/HEAD || echo git-refused-$((3*5)); touch .git/new; cat .git/HEAD' } }],
    [{ say: 'done' }],
  ]);
  const home = codexScratch('home');
  try {
    const run = await codexExec({ home, model, executor: server.url, cwd: ws, sandbox: 'workspace-write', prompt: 'go' });
    const sent = sentText(model.requests);
    assert.equal(model.requests.length, 4, `every scripted step was answered:\n${run.output}`);
    assert.ok(sent.includes('marker-42'), `the command's output reached the model:\n${run.output}`);
    assert.equal(fs.readFileSync(path.join(ws, 'made.txt'), 'utf8'), 'made\n');
    assert.ok(sent.includes('git-refused-15'), `the write into .git was not refused:\n${run.output}`);
    assert.ok(sent.includes('ref: refs/heads/main'), `.git was not readable:\n${run.output}`);
    assert.equal(fs.readFileSync(path.join(ws, '.git', 'HEAD'), 'utf8'), 'ref: refs/heads/main\n');
    assert.ok(!fs.existsSync(path.join(ws, '.git', 'new')), 'a file was created in .git');
    assert.ok(!sent.includes('canary-9d1e'), 'the command read outside its root');
    assert.ok(!fs.existsSync(path.join(outside, 'new.txt')), 'the command wrote outside its root');
    assert.equal(fs.readFileSync(path.join(outside, 'canary.txt'), 'utf8'), 'canary-9d1e\n');
    assert.ok(!sent.includes('secret-4b2a'), "the server's environment reached a command");
  } finally {
    model.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
});
