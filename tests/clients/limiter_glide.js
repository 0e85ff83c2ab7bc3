// rate-limiter-flexible's RateLimiterValkeyGlide, unmodified, with
// @valkey/valkey-glide against the server at 127.0.0.1:PORT: it loads its
// limiter as a function library (FUNCTION LOAD REPLACE, registered through
// Valkey's `server` table) and consumes with FCALL. Prints what it decided,
// one line per call, in a form that does not depend on the clock
// (tests/tests/limiter_libraries.rs checks it line by line).
const { GlideClient } = require('@valkey/valkey-glide');
const { RateLimiterValkeyGlide } = require('rate-limiter-flexible');

async function main() {
  const port = Number(process.argv[2]);
  const client = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port }], requestTimeout: 2000 });

  // 5 points per 60 s; the 6th and 7th consumptions are refused.
  const limiter = new RateLimiterValkeyGlide({ storeClient: client, points: 5, duration: 60, keyPrefix: 'glide' });
  for (let i = 0; i < 7; i++) {
    try {
      const res = await limiter.consume('user-1', 1);
      console.log(`glide allowed consumed=${res.consumedPoints} remaining=${res.remainingPoints} ttl_ok=${res.msBeforeNext > 0 && res.msBeforeNext <= 60000}`);
    } catch (res) {
      if (res instanceof Error) throw res;
      console.log(`glide refused consumed=${res.consumedPoints} remaining=${res.remainingPoints}`);
    }
  }
  const got = await limiter.get('user-1');
  console.log(`glide get consumed=${got.consumedPoints}`);
  // Over the limit with blockDuration: the key is blocked for 300 s.
  const blocking = new RateLimiterValkeyGlide({ storeClient: client, points: 1, duration: 10, blockDuration: 300, keyPrefix: 'glide-block' });
  await blocking.consume('user-2', 1);
  try {
    await blocking.consume('user-2', 1);
    console.log('glide block missing');
  } catch (res) {
    if (res instanceof Error) throw res;
    console.log(`glide blocked ms_ok=${res.msBeforeNext > 10000 && res.msBeforeNext <= 300000}`);
  }
  client.close();
  console.log('OK');
}

main().catch((e) => { console.error(e); process.exit(1); });
