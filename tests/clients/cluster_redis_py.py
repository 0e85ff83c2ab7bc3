"""redis-py's RedisCluster, unmodified, against the cluster whose first node
is at 127.0.0.1:<port> (argv[1]): it discovers the slots, routes keys to
every node, follows MOVED, runs the sliding-window limiter (the script file given
as argv[2]) through EVALSHA with hash-tagged keys, and pipelines across
nodes. Prints OK or raises."""

import sys

from redis.cluster import RedisCluster


with open(sys.argv[2]) as script:
    SEED = script.read()

cluster = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]), decode_responses=True)
nodes = {f"{n.host}:{n.port}" for n in cluster.get_primaries()}
assert len(nodes) == 3, nodes

keys = [f"key:{i}" for i in range(200)]
for i, key in enumerate(keys):
    assert cluster.set(key, i)
for i, key in enumerate(keys):
    assert cluster.get(key) == str(i), key
served = {f"{cluster.get_node_from_key(k).host}:{cluster.get_node_from_key(k).port}" for k in keys}
assert served == nodes, served

assert cluster.incr("{user:7}:hits") == 1
assert cluster.incrby("{user:7}:hits", 41) == 42

sha = cluster.script_load(SEED)
allowed = 0
for _ in range(12):
    reply = cluster.evalsha(sha, 2, "rl:{user:7}:c", "rl:{user:7}:p", 10, 60, 1720000030, 1)
    allowed += reply[0]
assert allowed == 10, allowed

pipe = cluster.pipeline()
for key in keys[:50]:
    pipe.incr(key)
assert pipe.execute() == [i + 1 for i in range(50)]

assert cluster.delete(*keys) == len(keys)
assert cluster.delete("{user:7}:hits", "rl:{user:7}:c") == 2
print("OK")
