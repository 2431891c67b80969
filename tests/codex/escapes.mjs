// Plays tests/escapes/processes.json against executors and tells, per case, whether the
// sandbox held: `node escapes.mjs` prints the table; escapes.test.mjs asserts capfs's column.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { alive, changes, fill, fixture, populate, sleepers, snapshot, until } from './escapes-fixture.mjs';
import { capfsTarget, codexTarget, landrunTarget } from './escapes-targets.mjs';

export const TABLE = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, '..', 'escapes', 'processes.json'), 'utf8'));

// The first line every case prints, so that a case that never ran is not taken for one that
// held.
const START = 'capfs-case-started';
// How long one case may take before it is terminated, and how long a daemon or a killed
// server is given to be gone.
const CASE_MS = 20_000;
const GONE_MS = 5_000;

// Outcomes that mean the sandbox kept the case inside.
export const HELD = new Set(['held', 'refused', 'ok']);

// Runs one case on one target: fills its placeholders, resets the trees, runs it, and checks
// every way its escape shows.
export async function play(target, c, f) {
  if (c.needs && !f.vars[c.needs]) return { outcome: 'n/a', why: `this host has no ${c.needs}` };
  populate(f, target.rootOwner);
  // The server's pid and port are known only once the target picked its server.
  const vars = { ...f.vars, SLEEP_MARK: `3599.${crypto.randomInt(100000, 999999)}`, SERVER_PID: '{SERVER_PID}', SERVER_PORT: '{SERVER_PORT}' };
  const guarded = [f.dirs.out, f.dirs.ro];
  if (c.roots === 'nested') guarded.push(path.join(f.dirs.root, 'nested-ro'));
  const before = guarded.map(snapshot);
  const counts = f.listeners.counts();
  const argv = [c.shell ?? 'sh', '-c', fill(`echo ${START}; ${c.command}`, vars)];
  const cwd = fill(c.cwd ?? '{ROOT}', vars);
  const r = await target.run({
    argv,
    cwd,
    network: c.network ?? 'none',
    roots: c.roots ?? 'plain',
    vars,
    deadlineMs: CASE_MS,
    onOutput: c.terminate ? (out) => /^READY$/m.test(out) : undefined,
  });
  const escapes = [];
  const output = r.output ?? '';
  if (output.includes(f.secret)) escapes.push('the secret in the output');
  guarded.forEach((dir, i) => {
    const changed = changes(before[i], snapshot(dir));
    if (changed.length) escapes.push(`${path.basename(dir)} changed: ${changed.slice(0, 3).join(', ')}`);
  });
  const checks = c.escaped_if ?? [];
  // A peer that reached a harness socket may not have been accepted yet: its socket's events
  // are given a short bounded while to come in.
  const sockets = [...checks, c.reaches].filter((k) => k in counts);
  if (sockets.length) await until(() => sockets.some((k) => f.listeners.counts()[k] > counts[k]), 300);
  const after = f.listeners.counts();
  for (const check of checks) {
    if (check === 'marker' && /^ESCAPED$/m.test(output)) escapes.push('ESCAPED printed');
    if (check in after && after[check] > counts[check]) escapes.push(`${check} reached`);
    if (check.startsWith('leftover:')) {
      const left = fill(check.slice('leftover:'.length), vars);
      if (fs.existsSync(left)) escapes.push(`${left} left behind`);
      fs.rmSync(left, { force: true, recursive: true });
    }
  }
  // Every case: the server must outlive it.
  const pid = Number(vars.SERVER_PID);
  const dead = checks.includes('server_dead') ? await until(() => !alive(pid), 1_000) : pid && !alive(pid);
  if (dead) escapes.push('the server is gone');
  if (checks.includes('survivor')) {
    const left = await until(() => sleepers(vars.SLEEP_MARK).length === 0, GONE_MS) ? [] : sleepers(vars.SLEEP_MARK);
    if (left.length) escapes.push(`a daemon outlived the case: pid ${left.join(', ')}`);
    for (const p of left) process.kill(p, 'SIGKILL');
  }
  const expect = c.expect ?? 'held';
  const why = escapes.join('; ');
  if (r.refused) {
    const outcome = expect === 'refused' || c.roots === 'nested' ? 'refused' : 'not run';
    return { outcome, why: r.refused.slice(0, 200) };
  }
  if (escapes.length) return { outcome: expect === 'held-or-documented' ? 'limit' : 'escaped', why };
  if (!output.includes(START)) return { outcome: 'not run', why: `${r.error ?? ''} ${output}`.trim().slice(0, 200) };
  if (expect === 'allowed') {
    const reached = !c.reaches || after[c.reaches] > counts[c.reaches];
    if (/^ALLOWED$/m.test(output) && reached) return { outcome: 'ok' };
    return { outcome: 'denied', why: `${reached ? '' : `${c.reaches} not reached; `}${output.slice(0, 200)}` };
  }
  if (expect === 'refused') return { outcome: 'started', why: 'the start was not refused, but nothing left' };
  if (r.timedOut && !c.terminate) return { outcome: 'held', why: 'ran to the deadline' };
  return { outcome: 'held' };
}

// Every case of `table` (the process table unless told) on every target, the cases marked
// `last` after the others.
export async function playAll(targets, f, { only, table = TABLE } = {}) {
  const cases = table.cases.filter((c) => !only || only.test(c.name));
  const ordered = [...cases.filter((c) => !c.last), ...cases.filter((c) => c.last)];
  const results = new Map(ordered.map((c) => [c.name, {}]));
  for (const target of targets) {
    for (const c of ordered) results.get(c.name)[target.name] = await play(target, c, f);
  }
  return { cases: ordered, results };
}

// The table: one row per case, one column per target, and the totals.
export function format(targets, { cases, results }) {
  const names = targets.map((t) => t.name);
  const width = Math.max(...cases.map((c) => c.name.length)) + 2;
  const col = Math.max(...names.map((n) => n.length)) + 2;
  const lines = [`${'case'.padEnd(width)}${names.map((n) => n.padEnd(col)).join('')}`];
  for (const c of cases) {
    const row = results.get(c.name);
    lines.push(`${c.name.padEnd(width)}${names.map((n) => row[n].outcome.padEnd(col)).join('')}`);
  }
  const total = (n, pick) => cases.filter((c) => pick(results.get(c.name)[n].outcome)).length;
  lines.push(`${'held'.padEnd(width)}${names.map((n) => String(total(n, (o) => HELD.has(o))).padEnd(col)).join('')}`);
  lines.push(`${'escaped'.padEnd(width)}${names.map((n) => String(total(n, (o) => o === 'escaped')).padEnd(col)).join('')}`);
  lines.push(`${'other'.padEnd(width)}${names.map((n) => String(total(n, (o) => !HELD.has(o) && o !== 'escaped')).padEnd(col)).join('')}`);
  const why = [];
  for (const c of cases) {
    for (const n of names) {
      const r = results.get(c.name)[n];
      if (r.outcome === 'escaped' || (!HELD.has(r.outcome) && r.why)) why.push(`  ${c.name} / ${n}: ${r.outcome}: ${r.why}`);
    }
  }
  return [...lines, '', 'why:', ...why].join('\n');
}

// The targets this machine has: capfs only when its binary serves processes, landrun only
// when LANDRUN names it.
export async function targets(f) {
  return [capfsTarget(f), codexTarget(f, 'null'), codexTarget(f, 'workspace-write'), landrunTarget(f)].filter(Boolean);
}

// Ends every server and process the run started, and removes its trees.
export function cleanUp(f, ts) {
  for (const t of ts ?? []) t.stop();
  f.listeners.close();
  fs.rmSync(f.dirs.base, { recursive: true, force: true });
}

if (process.argv[1] === import.meta.filename) {
  const f = await fixture();
  const ts = await targets(f);
  try {
    const only = process.env.ESCAPES_ONLY ? new RegExp(process.env.ESCAPES_ONLY) : undefined;
    console.log(format(ts, await playAll(ts, f, { only })));
  } finally {
    cleanUp(f, ts);
  }
}
