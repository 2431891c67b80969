// The real codex CLI (both pinned releases) with `capfs mcp --listen` as a Streamable HTTP MCP
// server (`url`, `bearer_token_env_var` and `default_tools_approval_mode` in its config.toml) and a scripted model: in one
// turn the model calls capfs's write_file and read_text_file through codex, checked by the file
// on disk and by the tool output codex sent the model back.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { test } from 'node:test';

import { CAPFS_BIN, CODEX_PACKAGES, codexExec, codexScratch, scratch, scriptedModel, sentText } from './lib.mjs';

const TOKEN = 'codex-mcp-http-token-93b2';
const MARKER = 'read-marker-4c1e through capfs mcp';

/** `capfs mcp --listen http://127.0.0.1:0/mcp` on `dir`; resolves with { url, stop, stderr }
 *  once it printed its URL. */
async function capfsMcpHttp(dir) {
  const child = spawn(CAPFS_BIN, ['mcp', '--listen', 'http://127.0.0.1:0/mcp', dir], {
    env: { ...process.env, CAPFS_TOKEN: TOKEN, RUST_LOG: 'capfs=info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const url = await new Promise((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`capfs mcp exited ${code}: ${stderr}`)));
  });
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
  return { url, stop, stderr: () => stderr };
}

/** The model's one step: codex's `exec` tool (JavaScript, with every tool on `tools`; MCP
 *  tools are named mcp__SERVER__TOOL) calls capfs's write_file, then read_text_file, and
 *  returns both results. */
function throughExec(ws) {
  const args = (o) => JSON.stringify(o);
  return {
    tool: 'exec',
    input: [
      `const written = await tools.mcp__capfs__write_file(${args({ path: path.join(ws, 'from-codex.txt'), content: 'written by codex\n' })});`,
      'text(JSON.stringify(written));',
      `const read = await tools.mcp__capfs__read_text_file(${args({ path: path.join(ws, 'hello.txt') })});`,
      'text(JSON.stringify(read));',
    ].join('\n'),
  };
}

for (const { version, bin } of CODEX_PACKAGES) {
  test(`codex ${version} reads and writes a file through capfs mcp over Streamable HTTP`, async (t) => {
    if (!fs.existsSync(bin)) return t.skip(`codex ${version} is not installed`);
    const ws = scratch('mcp-http');
    fs.writeFileSync(path.join(ws, 'hello.txt'), `${MARKER}\n`);
    const server = await capfsMcpHttp(ws);
    const model = await scriptedModel([[throughExec(ws)], [{ say: 'done' }]]);
    const home = codexScratch('mcp-http-home');
    try {
      const run = await codexExec({
        home, model, bin, cwd: ws, sandbox: 'read-only', prompt: 'go',
        // codex exec never prompts: capfs's tools are approved here (the sandbox is capfs's).
        config: ['[mcp_servers.capfs]', `url = "${server.url}"`, 'bearer_token_env_var = "CAPFS_MCP_TOKEN"', 'default_tools_approval_mode = "approve"'],
        env: { CAPFS_MCP_TOKEN: TOKEN },
      });
      assert.equal(model.requests.length, 2, `both scripted steps were answered:\n${run.output}\n${server.stderr()}`);
      const answered = sentText(model.requests.slice(1).map((r) => r.input.slice(-2)));
      assert.ok(fs.existsSync(path.join(ws, 'from-codex.txt')), `written: what codex answered:\n${answered.slice(0, 3000)}`);
      assert.equal(fs.readFileSync(path.join(ws, 'from-codex.txt'), 'utf8'), 'written by codex\n');
      assert.ok(answered.includes(MARKER), `the read reached the model:\n${answered.slice(0, 2000)}`);
      assert.ok(answered.includes(`Successfully wrote to ${path.join(ws, 'from-codex.txt')}`), answered.slice(0, 2000));
      assert.match(server.stderr(), /session started/);
      assert.ok(!server.stderr().includes(TOKEN));
    } finally {
      model.close();
      await server.stop();
    }
  });
}
