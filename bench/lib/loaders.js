// The load generators, one forked process per kind (bench/load/*.js), kept for the whole run.
const { fork } = require('node:child_process');
const { join } = require('node:path');

const workers = new Map();
let next = 0;

function worker(kind) {
  if (workers.has(kind)) return workers.get(kind);
  const child = fork(join(__dirname, '..', 'load', `${kind}.js`), [], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const pending = new Map();
  child.on('message', ({ id, result, error }) => {
    const call = pending.get(id);
    if (!call) return; // a held request answered after the run moved on
    pending.delete(id);
    if (error) call.reject(new Error(`load/${kind}: ${error}`));
    else call.resolve(result);
  });
  child.on('exit', (code) => {
    for (const call of pending.values()) call.reject(new Error(`load/${kind} exited with ${code}`));
    workers.delete(kind);
  });
  const entry = { child, pending };
  workers.set(kind, entry);
  return entry;
}

/** Sends one job (`measure` or `probe`) to the loader of `kind`; resolves with its answer. */
function send(kind, job, spec) {
  const { child, pending } = worker(kind);
  const id = ++next;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    child.send({ id, kind: job, spec });
  });
}

const closeLoaders = () => {
  for (const { child } of workers.values()) child.kill('SIGKILL');
  workers.clear();
};

module.exports = { send, closeLoaders };
