// ioredis's Cluster, unmodified, against the cluster whose first node is at
// 127.0.0.1:<port> (argv[2]): slots discovered, keys routed to every node,
// the seed's limiter (the script file given as argv[3]) through EVALSHA with
// hash-tagged keys, a pipeline per slot. Prints OK or exits 1.
const fs = require("fs");
const { Cluster } = require("ioredis");

const SEED = fs.readFileSync(process.argv[3], "utf8");

function check(condition, what) {
  if (!condition) {
    throw new Error(`failed: ${what}`);
  }
}

async function main() {
  const cluster = new Cluster([{ host: "127.0.0.1", port: Number(process.argv[2]) }], {
    enableReadyCheck: true,
  });
  await new Promise((resolve, reject) => {
    cluster.once("ready", resolve);
    cluster.once("error", reject);
  });
  check(cluster.nodes("master").length === 3, "three masters");
  const keys = Array.from({ length: 200 }, (_, i) => `key:${i}`);
  for (const [i, key] of keys.entries()) {
    check((await cluster.set(key, i)) === "OK", `SET ${key}`);
  }
  for (const [i, key] of keys.entries()) {
    check((await cluster.get(key)) === String(i), `GET ${key}`);
  }
  const served = new Set();
  for (const node of cluster.nodes("master")) {
    if ((await node.dbsize()) > 0) {
      served.add(`${node.options.host}:${node.options.port}`);
    }
  }
  check(served.size === 3, `keys on every node: ${[...served]}`);
  // As limiter libraries call it: EVALSHA, EVAL once on NOSCRIPT.
  cluster.defineCommand("seedLimiter", { numberOfKeys: 2, lua: SEED });
  let allowed = 0;
  for (let i = 0; i < 12; i++) {
    const reply = await cluster.seedLimiter("rl:{user:7}:c", "rl:{user:7}:p", 10, 60, 1720000030, 1);
    allowed += reply[0];
  }
  check(allowed === 10, `the limiter admitted ${allowed} of 12 against a limit of 10`);
  const pipeline = cluster.pipeline();
  for (let i = 0; i < 20; i++) {
    pipeline.incr("{user:7}:hits");
  }
  const results = await pipeline.exec();
  check(results[19][1] === 20, `pipelined INCRs: ${JSON.stringify(results[19])}`);
  check((await cluster.del(...keys.slice(0, 1))) === 1, "DEL");
  await cluster.quit();
  console.log("OK");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
