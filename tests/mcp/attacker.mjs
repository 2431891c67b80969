// The attacker of the race test, on its own thread: swaps the directory `d` inside the root for
// a symlink to the outside tree and back, as fast as it can, until told to stop.
import fs from "node:fs";
import path from "node:path";
import { workerData } from "node:worker_threads";

const { ws, outside, stop } = workerData;
const flag = new Int32Array(stop);
const d = path.join(ws, "d");
const real = path.join(ws, "d_real");
let swaps = 0;
while (Atomics.load(flag, 0) === 0) {
  // A tool may have re-created `d` while it was away (create_directory makes parents): put the
  // real directory back first (rmSync removes a link itself, never what it points at).
  if (fs.existsSync(real)) {
    try { fs.rmSync(d, { recursive: true, force: true }); fs.renameSync(real, d); } catch { continue; }
  }
  try { fs.renameSync(d, real); } catch { continue; }
  try { fs.symlinkSync(outside, d); } catch { /* keep going */ }
  for (let i = 0; i < 200; i++) { if (Atomics.load(flag, 0) !== 0) break; }
  try { fs.unlinkSync(d); } catch { /* keep going */ }
  try { fs.renameSync(real, d); } catch { /* keep going */ }
  swaps++;
}
// Leave the real directory in place.
try { if (fs.lstatSync(d).isSymbolicLink()) fs.unlinkSync(d); } catch { /* absent */ }
try { fs.renameSync(real, d); } catch { /* already back */ }
Atomics.store(flag, 1, swaps);
