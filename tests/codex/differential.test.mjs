// The same requests to codex's own `codex exec-server` and to `capfs serve`, on twin trees:
// results must be equal once root paths and times are normalised, except for the documented
// differences, each asserted below.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { capfsServe, codexExecServer, codexScratch, peer, scratch } from './lib.mjs';

let dir, roots, servers, peers;

function plant(root) {
  fs.mkdirSync(path.join(root, 'sub', '.hidden'), { recursive: true });
  fs.mkdirSync(path.join(root, 'empty'));
  fs.mkdirSync(path.join(root, '.agents', 'skills', 's'), { recursive: true });
  fs.writeFileSync(path.join(root, 'a.txt'), 'alpha\n');
  fs.writeFileSync(path.join(root, 'sp ace#.txt'), 'odd');
  fs.writeFileSync(path.join(root, 'sub', 'b.md'), '# b\n');
  fs.writeFileSync(path.join(root, 'sub', '.hidden', 'x'), 'x');
  fs.writeFileSync(path.join(root, '.agents', 'skills', 's', 'SKILL.md'), '---\nname: s\n---\n');
  fs.writeFileSync(path.join(root, 'replace.txt'), 'the old contents');
  fs.symlinkSync('sub', path.join(root, 'link_dir'));
  fs.symlinkSync('a.txt', path.join(root, 'link_file'));
}

before(async () => {
  dir = scratch('diff');
  roots = { codex: path.join(dir, 'codex'), capfs: path.join(dir, 'capfs') };
  for (const root of Object.values(roots)) {
    fs.mkdirSync(root);
    plant(root);
  }
  const home = codexScratch('home');
  servers = { codex: await codexExecServer(home), capfs: await capfsServe(['--root', roots.capfs]) };
  peers = {};
  for (const [name, server] of Object.entries(servers)) {
    peers[name] = await peer(server.url);
    const init = await peers[name].request('initialize', { clientName: 'differential' });
    assert.ok(init.result?.sessionId, `${name}: ${JSON.stringify(init)}`);
    peers[name].notify('initialized', {});
  }
});

after(() => {
  for (const p of Object.values(peers ?? {})) p.close();
  for (const s of Object.values(servers ?? {})) s?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// The request's params with `ROOT` replaced by the server's root URI.
function params(value, root) {
  return JSON.parse(JSON.stringify(value).replaceAll('ROOT', `file://${root}`));
}

// A reply with the server's root replaced by `ROOT`, times dropped, errors reduced to their
// code, and listings in name order.
function normalise(reply, root) {
  const text = JSON.stringify(reply).replaceAll(`file://${root}`, 'ROOT').replaceAll(root, 'ROOT');
  const value = JSON.parse(text);
  delete value.id;
  if (value.error) return { error: value.error.code };
  const result = value.result;
  if (result && typeof result === 'object') {
    delete result.createdAtMs;
    delete result.modifiedAtMs;
    delete result.accessedAtMs; // capfs's extension
    delete result.mode; // capfs's extension
    delete result.nonUtf8NamesOmitted; // capfs's extension
    if (Array.isArray(result.entries) && result.entries[0]?.fileName !== undefined) {
      result.entries.sort((a, b) => (a.fileName < b.fileName ? -1 : 1));
      for (const entry of result.entries) delete entry.isSymlink; // capfs's extension
    }
  }
  return value;
}

async function both(method, template) {
  const out = {};
  for (const name of ['codex', 'capfs']) {
    const reply = await peers[name].request(method, params(template, roots[name]));
    out[name] = normalise(reply, roots[name]);
  }
  return out;
}

const walk = (options) => ({ path: 'ROOT', options, sandbox: null });
const opts = (maxDepth, maxDirectories, maxEntries, follow, prune) => ({
  maxDepth, maxDirectories, maxEntries, followDirectorySymlinks: follow, pruneHiddenDirectories: prune,
});

// Requests answered alike, in order (later ones see what earlier ones changed).
const SAME = [
  ['fs/getMetadata', { path: 'ROOT/a.txt', sandbox: null }],
  ['fs/getMetadata', { path: 'ROOT/sub', sandbox: null }],
  ['fs/getMetadata', { path: 'ROOT/link_dir', sandbox: null }],
  ['fs/getMetadata', { path: 'ROOT/missing', sandbox: null }],
  ['fs/readFile', { path: 'ROOT/a.txt', sandbox: null }],
  ['fs/readFile', { path: 'ROOT/sp%20ace%23.txt', sandbox: null }],
  ['fs/readFile', { path: 'ROOT/link_file', sandbox: null }],
  ['fs/readFile', { path: 'ROOT/missing', sandbox: null }],
  ['fs/readDirectory', { path: 'ROOT', sandbox: null }],
  ['fs/readDirectory', { path: 'ROOT/sub', sandbox: null }],
  ['fs/readDirectory', { path: 'ROOT/missing', sandbox: null }],
  ['fs/walk', walk(opts(5, 100, 100, false, false))],
  ['fs/walk', walk(opts(5, 100, 100, true, true))],
  ['fs/walk', walk(opts(0, 100, 100, false, false))],
  ['fs/walk', walk(opts(5, 100, 2, false, false))],
  ['fs/walk', walk(opts(5, 1, 100, false, false))],
  ['fs/walk', { path: 'ROOT/a.txt', options: opts(5, 10, 10, false, false), sandbox: null }],
  ['fs/walk', { path: 'ROOT/missing', options: opts(5, 10, 10, false, false), sandbox: null }],
  ['fs/canonicalize', { path: 'ROOT/link_dir/b.md', sandbox: null }],
  ['fs/canonicalize', { path: 'ROOT/sub/../a.txt', sandbox: null }],
  ['fs/canonicalize', { path: 'ROOT/missing', sandbox: null }],
  ['fs/open', { handleId: 'r1', path: 'ROOT/a.txt', mode: 'read', sandbox: null }],
  ['fs/readBlock', { handleId: 'r1', offset: 0, len: 3 }],
  ['fs/readBlock', { handleId: 'r1', offset: 3, len: 100 }],
  ['fs/readBlock', { handleId: 'r1', offset: 100, len: 1 }],
  ['fs/open', { handleId: 'r1', path: 'ROOT/a.txt', mode: 'read', sandbox: null }],
  ['fs/close', { handleId: 'r1' }],
  ['fs/readBlock', { handleId: 'r1', offset: 0, len: 3 }],
  ['fs/open', { handleId: 'r2', path: 'ROOT/missing', mode: 'read', sandbox: null }],
  ['fs/writeFile', { path: 'ROOT/new.txt', dataBase64: 'bmV3Cg==', sandbox: null }],
  ['fs/readFile', { path: 'ROOT/new.txt', sandbox: null }],
  ['fs/writeFile', { path: 'ROOT/nodir/x.txt', dataBase64: 'eA==', sandbox: null }],
  ['fs/createDirectory', { path: 'ROOT/d/e', recursive: true, sandbox: null }],
  ['fs/getMetadata', { path: 'ROOT/d/e', sandbox: null }],
  ['fs/copy', { sourcePath: 'ROOT/a.txt', destinationPath: 'ROOT/d/c.txt', recursive: false, sandbox: null }],
  ['fs/readFile', { path: 'ROOT/d/c.txt', sandbox: null }],
  ['fs/remove', { path: 'ROOT/new.txt', recursive: false, force: false, sandbox: null }],
  ['fs/getMetadata', { path: 'ROOT/new.txt', sandbox: null }],
  ['fs/open', { handleId: 'w1', path: 'ROOT/fresh.txt', mode: 'replace', sandbox: null }],
  ['fs/writeBlock', { handleId: 'w1', offset: 0, chunk: 'Zmly' }],
  ['fs/writeBlock', { handleId: 'w1', offset: 3, chunk: 'c3Q=' }],
  ['fs/close', { handleId: 'w1' }],
  ['fs/readFile', { path: 'ROOT/fresh.txt', sandbox: null }],
  ['environment/status', null],
  ['no/suchMethod', {}],
];

test('the same requests get the same answers from codex exec-server and capfs serve', async () => {
  const differences = [];
  for (const [method, template] of SAME) {
    const { codex, capfs } = await both(method, template);
    try {
      assert.deepEqual(capfs, codex);
    } catch {
      differences.push(`${method} ${JSON.stringify(template)}\n  codex: ${JSON.stringify(codex)}\n  capfs: ${JSON.stringify(capfs)}`);
    }
  }
  assert.equal(differences.length, 0, `answers differ:\n${differences.join('\n')}`);
});

test('documented difference: a path outside the roots is refused by capfs, served by codex', async () => {
  const outside = path.join(dir, 'outside.txt');
  fs.writeFileSync(outside, 'outside');
  const read = { path: `file://${outside}`, sandbox: null };
  const codex = await peers.codex.request('fs/readFile', read);
  const capfs = await peers.capfs.request('fs/readFile', read);
  assert.equal(Buffer.from(codex.result.dataBase64, 'base64').toString(), 'outside');
  assert.equal(capfs.error.code, -32600);
  assert.equal(capfs.error.data.kind, 'PermissionDenied');
  const write = { path: `file://${dir}/planted-by-capfs.txt`, dataBase64: 'eA==', sandbox: null };
  assert.equal((await peers.capfs.request('fs/writeFile', write)).error.code, -32600);
  assert.ok(!fs.existsSync(path.join(dir, 'planted-by-capfs.txt')));
});

test('documented difference: capfs replaces atomically on fs/close, codex writes in place', async () => {
  const seen = {};
  for (const name of ['codex', 'capfs']) {
    const p = peers[name];
    const target = path.join(roots[name], 'replace.txt');
    const open = await p.request('fs/open', { handleId: 'x', path: `file://${target}`, mode: 'replace', sandbox: null });
    assert.ok(open.result, `${name}: ${JSON.stringify(open)}`);
    assert.ok((await p.request('fs/writeBlock', { handleId: 'x', offset: 0, chunk: 'cGFydA==' })).result);
    seen[name] = fs.readFileSync(target, 'utf8');
    assert.ok((await p.request('fs/close', { handleId: 'x' })).result);
    assert.equal(fs.readFileSync(target, 'utf8'), 'part', `${name} after close`);
  }
  assert.equal(seen.capfs, 'the old contents', 'capfs: the old file until fs/close');
  assert.notEqual(seen.codex, 'the old contents', 'codex: the path changed before fs/close');
});

test('documented difference: capfs says which kind an error is, in data.kind', async () => {
  const missing = (root) => ({ path: `file://${root}/missing`, sandbox: null });
  const codex = await peers.codex.request('fs/getMetadata', missing(roots.codex));
  const capfs = await peers.capfs.request('fs/getMetadata', missing(roots.capfs));
  assert.equal(codex.error.code, -32004);
  assert.equal(capfs.error.code, -32004);
  assert.equal(codex.error.data, undefined);
  assert.equal(capfs.error.data.kind, 'NotFound');
});
