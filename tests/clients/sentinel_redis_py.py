"""redis-py's Sentinel, unmodified: asks the sentinels at 127.0.0.1:<port>
(argv[1], comma-separated) for the master named `mymaster`, checks that
it is at the port argv[2], increments `sentinel:hits` there through
master_for and reads it back from a replica through slave_for. Prints
the count, then OK, or raises."""

import sys
import time

from redis.sentinel import Sentinel

sentinel = Sentinel(
    [("127.0.0.1", int(port)) for port in sys.argv[1].split(",")], socket_timeout=2
)
host, port = sentinel.discover_master("mymaster")
assert (host, port) == ("127.0.0.1", int(sys.argv[2])), (host, port)
master = sentinel.master_for("mymaster", socket_timeout=2, decode_responses=True)
count = master.incr("sentinel:hits")
replica = sentinel.slave_for("mymaster", socket_timeout=2, decode_responses=True)
deadline = time.time() + 10
while replica.get("sentinel:hits") != str(count):
    assert time.time() < deadline, "the replica never had the increment"
    time.sleep(0.05)
print(count)
print("OK")
