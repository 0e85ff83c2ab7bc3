// ioredis's Sentinel discovery, unmodified: connects to the master named
// `mymaster` through the sentinels at 127.0.0.1:<port> (argv[2],
// comma-separated), checks that it reached the port argv[3], increments
// `sentinel:hits` and prints the count, then OK; exits 1 on any error.
const Redis = require("ioredis");

async function main() {
  const sentinels = process.argv[2]
    .split(",")
    .map((port) => ({ host: "127.0.0.1", port: Number(port) }));
  const master = new Redis({ sentinels, name: "mymaster", lazyConnect: true });
  await master.connect();
  const reached = master.stream.remotePort;
  if (reached !== Number(process.argv[3])) {
    throw new Error(`reached port ${reached}, expected ${process.argv[3]}`);
  }
  const count = await master.incr("sentinel:hits");
  console.log(count);
  master.disconnect();
  console.log("OK");
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
