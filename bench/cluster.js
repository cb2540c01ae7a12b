// bench/apps/http.js as WORKERS processes (Node's cluster module) sharing one port, as a service
// scaled out on one machine runs. Same environment as apps/http.js (no control server). Prints `CLUSTER READY <port> <pids>` once
// every worker listens.
const cluster = require('node:cluster');
const { join } = require('node:path');

const workers = Number(process.env.WORKERS ?? 4);
process.env.NO_CONTROL = '1';
cluster.setupPrimary({ exec: join(__dirname, 'apps', 'http.js'), silent: true });
let listening = 0;
const pids = [];
for (let i = 0; i < workers; i++) {
  const worker = cluster.fork();
  pids.push(worker.process.pid);
  worker.process.stderr.pipe(process.stderr);
  worker.on('exit', (code) => {
    process.stderr.write(`cluster worker exited with ${code}\n`);
    process.exit(1);
  });
}
cluster.on('listening', (_worker, address) => {
  if (++listening === workers)
    process.stdout.write(`CLUSTER READY ${address.port} ${pids.join(',')}\n`);
});
