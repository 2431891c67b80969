// The real codex CLI (pinned in package-lock.json) with `capfs serve` as its executor and a
// scripted model: each step is checked by its effect on disk and by what codex sent the model,
// never by codex's exit status.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { CAPFS_BIN, capfsServe, codexExec, codexScratch, png, scratch, scriptedModel, sentText } from './lib.mjs';

const AGENTS_MARKER = 'agents-marker-7f3a: answer in haiku';
const SKILL_MARKER = 'skill-marker-51c9 formats release notes';

let dir, ws, outside, server;

before(async () => {
  dir = scratch('real');
  ws = path.join(dir, 'ws');
  outside = path.join(dir, 'outside');
  fs.mkdirSync(path.join(ws, '.agents', 'skills', 'notes'), { recursive: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(ws, 'AGENTS.md'), `${AGENTS_MARKER}\n`);
  fs.writeFileSync(
    path.join(ws, '.agents', 'skills', 'notes', 'SKILL.md'),
    `---\nname: release-notes\ndescription: ${SKILL_MARKER}\n---\nWrite the notes.\n`,
  );
  fs.writeFileSync(path.join(ws, 'small.png'), png(8));
  fs.writeFileSync(path.join(ws, 'big.png'), png(900));
  fs.writeFileSync(path.join(outside, 'canary.txt'), 'canary\n');
  server = await capfsServe(['--root', ws]);
});

after(() => {
  server?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const patch = (body) => ({ tool: 'apply_patch', input: `*** Begin Patch\n${body}*** End Patch\n` });

test('a codex turn reads its instructions and skills and edits files through capfs', async () => {
  const model = await scriptedModel([
    [patch('*** Add File: hello.txt\n+hello\n')],
    [patch('*** Add File: deep/new/n.txt\n+nested\n')],
    [patch('*** Update File: hello.txt\n@@\n-hello\n+hello2\n')],
    [patch('*** Update File: hello.txt\n*** Move to: moved.txt\n@@\n-hello2\n+hello3\n')],
    [patch('*** Delete File: deep/new/n.txt\n')],
    [{ call: 'view_image', args: { path: 'small.png' } }],
    [{ call: 'view_image', args: { path: 'big.png' } }],
    [{ say: 'done' }],
  ]);
  const home = codexScratch('home');
  try {
    const run = await codexExec({ home, model, executor: server.url, cwd: ws, sandbox: 'workspace-write', prompt: 'go' });
    const sent = sentText(model.requests);
    assert.equal(model.requests.length, 8, `every scripted step was answered:\n${run.output}`);
    assert.ok(sent.includes(AGENTS_MARKER), 'AGENTS.md reached the prompt');
    assert.ok(sent.includes(SKILL_MARKER), 'the repo skill reached the prompt');
    assert.equal(fs.readFileSync(path.join(ws, 'moved.txt'), 'utf8'), 'hello3\n', 'add, update and move');
    assert.ok(!fs.existsSync(path.join(ws, 'hello.txt')), 'the move left no source');
    assert.ok(fs.statSync(path.join(ws, 'deep', 'new')).isDirectory(), 'added into a new directory');
    assert.ok(!fs.existsSync(path.join(ws, 'deep', 'new', 'n.txt')), 'deleted');
    const images = sent.match(/data:image\/png;base64,[A-Za-z0-9+/=]+/g) ?? [];
    const sizes = images.map((url) => Buffer.from(url.split(',')[1], 'base64').length);
    assert.ok(sizes.includes(fs.statSync(path.join(ws, 'small.png')).size), `small image sent whole: ${sizes}`);
    assert.ok(sizes.some((n) => n > 1_000_000) || sent.includes('big.png'), `big image handled: ${sizes}`);
    assert.deepEqual(fs.readdirSync(outside), ['canary.txt']);
  } finally {
    model.close();
  }
});

for (const sandbox of ['workspace-write', 'danger-full-access']) {
  test(`a write outside the workspace is refused in ${sandbox} mode`, async () => {
    const target = path.join(outside, `planted-${sandbox}.txt`);
    const model = await scriptedModel([
      [patch(`*** Add File: ${target}\n+planted\n`)],
      [{ say: 'done' }],
    ]);
    const home = codexScratch('home');
    try {
      // In full-access mode codex itself lets the write through, so only capfs can stop it.
      const run = await codexExec({ home, model, executor: server.url, cwd: ws, sandbox, prompt: 'go' });
      assert.equal(model.requests.length, 2, run.output);
      assert.ok(!fs.existsSync(target), 'nothing was planted outside the root');
      assert.deepEqual(fs.readdirSync(outside), ['canary.txt']);
      assert.equal(fs.readFileSync(path.join(outside, 'canary.txt'), 'utf8'), 'canary\n');
      const outputs = model.requests[1].input.filter((item) => item.type === 'custom_tool_call_output');
      assert.match(JSON.stringify(outputs), /Failed to write file|rejected|denied/i, 'the refusal reached the model');
    } finally {
      model.close();
    }
  });
}

// `environments.toml` naming capfs over stdio (JSON lines), as over ssh; `include_local = false`
// so that codex never falls back to running the turn on the host.
function environments(args) {
  return [
    'default = "capfs"',
    'include_local = false',
    '[[environments]]',
    'id = "capfs"',
    `program = ${JSON.stringify(CAPFS_BIN)}`,
    `args = ${JSON.stringify(['serve', '--listen', 'stdio', ...args])}`,
    '',
  ].join('\n');
}

test('codex starts capfs over stdio from environments.toml', async () => {
  const model = await scriptedModel([[patch('*** Add File: stdio/made.txt\n+over stdio\n')], [{ say: 'done' }]]);
  const home = codexScratch('home');
  try {
    const run = await codexExec({ home, model, environments: environments(['--root', ws]), cwd: ws, sandbox: 'workspace-write', prompt: 'go' });
    assert.equal(model.requests.length, 2, run.output);
    assert.equal(fs.readFileSync(path.join(ws, 'stdio', 'made.txt'), 'utf8'), 'over stdio\n', run.output);
  } finally {
    model.close();
  }
});

test('with include_local = false, an executor that fails leaves the host untouched', async () => {
  const model = await scriptedModel([[patch('*** Add File: fallback.txt\n+ran on the host\n')], [{ say: 'done' }]]);
  const home = codexScratch('home');
  try {
    // capfs refuses to start on a root that does not exist.
    const bad = environments(['--root', path.join(dir, 'does-not-exist')]);
    const run = await codexExec({ home, model, environments: bad, cwd: ws, sandbox: 'workspace-write', prompt: 'go' });
    assert.ok(model.requests.length >= 1, run.output);
    assert.ok(!fs.existsSync(path.join(ws, 'fallback.txt')), 'the turn did not run on the host');
    assert.match(sentText(model.requests.slice(1)), /No usable execution environment/, run.output);
  } finally {
    model.close();
  }
});

test('codex sends auth_bearer_token to a capfs serve that asks for a token', async () => {
  const token = 'a-token-for-this-test-only-4b1d';
  const guarded = await capfsServe(['--root', ws], { CAPFS_TOKEN: token });
  const entry = (bearer) =>
    ['default = "capfs"', 'include_local = false', '[[environments]]', 'id = "capfs"',
      `url = "${guarded.url}"`, `auth_bearer_token = "${bearer}"`, ''].join('\n');
  try {
    for (const [bearer, file, lands] of [[token, 'token/ok.txt', true], ['wrong', 'token/no.txt', false]]) {
      const model = await scriptedModel([[patch(`*** Add File: ${file}\n+x\n`)], [{ say: 'done' }]]);
      const home = codexScratch('home');
      try {
        const run = await codexExec({ home, model, environments: entry(bearer), cwd: ws, sandbox: 'workspace-write', prompt: 'go' });
        assert.equal(fs.existsSync(path.join(ws, file)), lands, `${bearer}: ${run.output}`);
      } finally {
        model.close();
      }
    }
  } finally {
    guarded.stop();
  }
});
