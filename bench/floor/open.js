// The floor of the lane's store, for bench/floor/app.js and runner.js: Redis (bench/floor/floor.js)
// or PostgreSQL and MySQL/MariaDB (bench/floor/floor-sql.js), with the store calls counted as the
// library's lanes count theirs. Env: STORE (redis|postgres|mysql), REDIS_URL and KEY_PREFIX,
// POSTGRES_URL, MYSQL_URL, TABLE (the lane's table, which the bench drops before and after a run).
const { countStoreCalls } = require('../apps/common');

async function openFloor(env = process.env) {
  const store = env.STORE ?? 'redis';
  countStoreCalls(store);
  if (store === 'redis') {
    const Redis = require('ioredis').default;
    const { createFloor } = require('./floor');
    return createFloor(new Redis(env.REDIS_URL), { prefix: env.KEY_PREFIX });
  }
  const { createSqlFloor } = require('./floor-sql');
  const url = store === 'postgres' ? env.POSTGRES_URL : env.MYSQL_URL;
  return createSqlFloor(store, url, env.TABLE);
}

module.exports = { openFloor };
