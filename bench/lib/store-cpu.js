// The store's CPU time spent on one app's requests: the private redis-server's (the bench's
// own, so all of it; from its INFO cpu, getrusage in µs, where /proc counts 10 ms ticks: 10 µs
// a request in a quick measurement of 1 000 requests), and for the SQL stores only the server processes serving that app's
// connections (the servers are shared with other work): PostgreSQL's backends
// (pg_stat_activity.pid) and MariaDB's connection threads (information_schema.PROCESSLIST.TID),
// matched to the app by the local ports of its sockets. Work the servers do in the background
// for those writes (WAL writer, InnoDB's purge and page cleaner) is not counted.
const { connectionPorts, cpuMicros, findProcess } = require('./procs');

class StoreCpu {
  constructor({ redisPid, redis, postgresUrl, mysqlUrl }) {
    this.redisPid = redisPid;
    /** A client of the private redis-server (optional: else /proc's ticks of `redisPid`). */
    this.redis = redis;
    this.postgresUrl = postgresUrl;
    this.mysqlUrl = mysqlUrl;
  }

  async pg() {
    if (!this.pgPool) {
      const { Pool } = require('pg');
      this.pgPool = new Pool({ connectionString: this.postgresUrl, max: 1 });
    }
    return this.pgPool;
  }

  async my() {
    if (!this.myPool) {
      const mysql = require('mysql2/promise');
      this.myPool = mysql.createPool({ uri: this.mysqlUrl, connectionLimit: 1 });
      this.mariadbPid = findProcess(['mariadbd', 'mysqld']);
    }
    return this.myPool;
  }

  /** The private redis-server's CPU time, µs (user + system, all threads). */
  async redisMicros() {
    if (!this.redis) return cpuMicros(this.redisPid);
    const info = await this.redis.info('cpu');
    const field = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1]);
    return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6;
  }

  /** CPU µs per server process or thread serving `app`, now: a Map of name -> µs. */
  async sample(app) {
    const times = new Map();
    const { store } = app.lane;
    if (store === 'redis') times.set('redis', await this.redisMicros());
    if (store === 'postgres') {
      const ports = connectionPorts(app.pid, Number(new URL(this.postgresUrl).port || 5432));
      if (ports.length) {
        const { rows } = await (
          await this.pg()
        ).query('SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[])', [ports]);
        for (const { pid } of rows) times.set(`pg:${pid}`, cpuMicros(pid));
      }
    }
    if (store === 'mysql') {
      const ports = connectionPorts(app.pid, Number(new URL(this.mysqlUrl).port || 3306));
      const pool = await this.my();
      if (ports.length && this.mariadbPid) {
        const [rows] = await pool.query(
          "SELECT TID FROM information_schema.PROCESSLIST WHERE SUBSTRING_INDEX(HOST, ':', -1) IN (?)",
          [ports.map(String)],
        );
        for (const { TID } of rows) times.set(`my:${TID}`, cpuMicros(this.mariadbPid, TID));
      }
    }
    return times;
  }

  /** µs between two samples; a process or thread that appeared meanwhile counts from zero. */
  static delta(before, after) {
    if (after.size === 0) return undefined;
    let total = 0;
    for (const [name, value] of after) {
      if (value !== undefined) total += value - (before.get(name) ?? 0);
    }
    return total;
  }

  async close() {
    await this.pgPool?.end();
    await this.myPool?.end();
  }
}

module.exports = { StoreCpu };
