// redlock_cycle.js: node-redlock (single instance, on ioredis) in
// bench/cycle.lua.
//
// usage: node redlock_cycle.js HOST PORT NAME ITERATIONS
//
// One uncontended cycle per iteration: redlock.lock(name, 10000) (its lock
// script, EVALSHA) then lock.unlock() (its unlock script), with retryCount 0
// so that a refused lock fails instead of retrying. Prints one line
// "cycle <ns>" per iteration, at the end; exits non-zero on any failure.
'use strict';
const Redis = require('ioredis');
const Redlock = require('redlock');

async function main() {
  const [host, port, name, iterations] = process.argv.slice(2);
  const client = new Redis({ host, port: Number(port), lazyConnect: true });
  await client.connect();
  const redlock = new Redlock([client], { retryCount: 0, driftFactor: 0.01 });
  const out = [];
  for (let i = 0; i < Number(iterations); i++) {
    const t0 = process.hrtime.bigint();
    const lock = await redlock.lock(name, 10000);
    await lock.unlock();
    out.push('cycle ' + (process.hrtime.bigint() - t0).toString());
  }
  process.stdout.write(out.join('\n') + '\n');
  await client.quit();
}

main().catch((err) => {
  process.stderr.write('redlock_cycle: ' + (err && err.stack || err) + '\n');
  process.exit(1);
});
