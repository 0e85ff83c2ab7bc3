// rate-limiter-flexible's RateLimiterRedis and rate-limit-redis's
// RedisStore (express-rate-limit), unmodified, with ioredis against the
// server at 127.0.0.1:PORT. Prints what each library decided, one line per
// call, in a form that does not depend on the clock (tests/tests/
// limiter_libraries.rs compares it between tally and redis-server).
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const { RedisStore } = require('rate-limit-redis');

async function main() {
  const port = Number(process.argv[2]);
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  await client.connect();

  // 5 points per 60 s; the 6th and 7th consumptions are refused.
  const limiter = new RateLimiterRedis({ storeClient: client, points: 5, duration: 60, keyPrefix: 'rlflx' });
  for (let i = 0; i < 7; i++) {
    try {
      const res = await limiter.consume('user-1', 1);
      console.log(`flexible allowed consumed=${res.consumedPoints} remaining=${res.remainingPoints} first=${res.isFirstInDuration} ttl_ok=${res.msBeforeNext > 0 && res.msBeforeNext <= 60000}`);
    } catch (res) {
      if (res instanceof Error) throw res;
      console.log(`flexible refused consumed=${res.consumedPoints} remaining=${res.remainingPoints}`);
    }
  }
  // Two points at once, on another key.
  const res = await limiter.consume('user-2', 2);
  console.log(`flexible allowed consumed=${res.consumedPoints} remaining=${res.remainingPoints}`);

  const store = new RedisStore({ sendCommand: (...args) => client.call(...args), prefix: 'rl:' });
  store.init({ windowMs: 60000 });
  for (let i = 0; i < 3; i++) {
    const { totalHits, resetTime } = await store.increment('user-1');
    const left = resetTime.getTime() - Date.now();
    console.log(`rate-limit-redis hits=${totalHits} reset_ok=${left > 0 && left <= 60000}`);
  }
  await store.decrement('user-1');
  const { totalHits } = await store.increment('user-1');
  console.log(`rate-limit-redis after a decrement hits=${totalHits}`);
  client.disconnect();
  console.log('OK');
}

main().catch((e) => { console.error(e); process.exit(1); });
