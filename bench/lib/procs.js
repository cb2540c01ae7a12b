// Child processes of the bench (never left behind), free ports, and CPU time from /proc.
const { spawn, spawnSync } = require('node:child_process');
const { readFileSync, readdirSync, readlinkSync } = require('node:fs');
const { createServer } = require('node:net');

const children = new Set();
// Never leave a Redis, an app or a loader behind, even when the run dies.
process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')));

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

/**
 * Spawns `command` and resolves once its stdout matches `ready` (with the match and the pid);
 * rejects if it exits first. stderr is passed through, prefixed with `name`.
 */
function start(command, args, { env = {}, ready, name = command, ipc = false } = {}) {
  const child = spawn(command, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc'] : [])],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  child.stderr.on('data', (chunk) => {
    for (const line of String(chunk).split('\n'))
      if (line) process.stderr.write(`[${name}] ${line}\n`);
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = ready?.exec(out);
      if (match) resolve({ match, out, pid: child.pid, child });
    });
    child.on('exit', (code, signal) =>
      reject(
        new Error(`${name} exited (${code ?? signal}) before it was ready: ${out.slice(-500)}`),
      ),
    );
  });
}

function stop(child) {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  children.delete(child);
}

const stopAll = () => [...children].forEach(stop);

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/** CPU time (user + system) of a process, all its threads, or of one thread: µs; undefined if gone. */
function cpuMicros(pid, tid) {
  try {
    const path = tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`;
    const fields = readFileSync(path, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/**
 * The local ports of a process's TCP connections to `remotePort` (its sockets in /proc/<pid>/fd
 * matched by inode against /proc/net/tcp{,6}): how a store server names that process's sessions.
 */
function connectionPorts(pid, remotePort) {
  const inodes = new Set();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (match) inodes.add(match[1]);
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    return [];
  }
  const ports = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10 || !inodes.has(cols[9])) continue;
      const local = parseInt(cols[1].split(':')[1], 16);
      const remote = parseInt(cols[2].split(':')[1], 16);
      if (remote === remotePort) ports.push(local);
    }
  }
  return ports;
}

/** The pid of the first process whose command name is one of `names` (e.g. mariadbd). */
function findProcess(names) {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (names.includes(readFileSync(`/proc/${entry}/comm`, 'utf8').trim())) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

module.exports = { freePort, start, stop, stopAll, cpuMicros, connectionPorts, findProcess };
