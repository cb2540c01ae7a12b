// The knobs of npm run bench (environment variables and flags; see bench/README.md). --quick (or
// BENCH_QUICK=1) runs every lane with short measurements and two rounds: minutes, for checking
// that everything runs, not for numbers to publish.
const argv = process.argv.slice(2);
const flag = (name) => argv.includes(`--${name}`);
const option = (name) => argv.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1];
const QUICK = flag('quick') || process.env.BENCH_QUICK === '1';
const num = (name, full, quick) => Number(process.env[name] ?? (QUICK ? quick : full));
const list = (value) => (value ? value.split(',').filter(Boolean) : undefined);

module.exports = {
  QUICK,
  /** Seconds per measurement. */
  DURATION: num('BENCH_DURATION', 1.25, 0.5),
  /** Seconds of warm-up per measurement before the rounds (0: none). */
  WARMUP: num('BENCH_WARMUP', 0.5, 0.25),
  /** Rounds of the comparison groups. */
  ROUNDS: num('BENCH_ROUNDS', 4, 2),
  /** Rounds of the coverage groups (every entry point on every store, the variants). */
  COVERAGE_ROUNDS: num('BENCH_COVERAGE_ROUNDS', 3, 2),
  CONNECTIONS: num('BENCH_CONNECTIONS', 20, 20),
  /** Calls in flight in the run() lanes' `16 in flight` scenarios. */
  IN_FLIGHT: num('BENCH_IN_FLIGHT', 16, 16),
  /** Sequential requests per scenario when counting Redis commands with MONITOR. */
  RT_REQUESTS: num('BENCH_RT_REQUESTS', 50, 10),
  WAIT_KEYS: num('BENCH_WAIT_KEYS', 200, 5),
  WAITERS: num('BENCH_WAITERS', 20, 5),
  WAIT_SETTLE_MS: num('BENCH_WAIT_SETTLE_MS', 30, 30),
  /** Only these groups or lanes (--only=http,floor-run-redis or BENCH_ONLY). */
  ONLY: list(option('only') ?? process.env.BENCH_ONLY),
  /** The handler with ~5 ms of simulated I/O beside the trivial one, on the HTTP peers' lanes. */
  IO: flag('io') || process.env.BENCH_IO === '1',
  /** Four app processes on one Redis, and a million records (bench/scale.js). */
  SCALE: flag('scale') || process.env.BENCH_SCALE === '1',
  /** Leave bench/README.md alone (the results are still written to bench/results/). */
  NO_README: flag('no-readme') || process.env.BENCH_NO_README === '1',
  POSTGRES_URL:
    process.env.BENCH_POSTGRES_URL ??
    process.env.IDEMPOTENCY_TEST_POSTGRES_URL ??
    'postgres://postgres@127.0.0.1:5432/test',
  MYSQL_URL:
    process.env.BENCH_MYSQL_URL ??
    process.env.IDEMPOTENCY_TEST_MYSQL_URL ??
    'mysql://root@127.0.0.1:3306/test',
};
