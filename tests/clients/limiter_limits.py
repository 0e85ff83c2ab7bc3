"""Python's `limits` (behind Flask-Limiter and slowapi), unmodified,
against the server at 127.0.0.1:PORT: its fixed-window strategy, which
runs the library's incr_expire.lua through EVALSHA, its sliding-window
counter (acquire_sliding_window.lua) and its moving window
(acquire_moving_window.lua). Prints what it
decided, one line per call (tests/tests/limiter_libraries.rs compares the
output between tally and redis-server)."""
import sys

from limits import parse, storage, strategies

port = sys.argv[1]
store = storage.RedisStorage(f"redis://127.0.0.1:{port}")
fixed = strategies.FixedWindowRateLimiter(store)
limit = parse("3/minute")
for i in range(5):
    print("fixed-window hit", fixed.hit(limit, "user-1"))
print("fixed-window two at once", fixed.hit(limit, "user-2", cost=2))
stats = fixed.get_window_stats(limit, "user-1")
print("fixed-window remaining", stats.remaining)
sliding = strategies.SlidingWindowCounterRateLimiter(store)
for i in range(5):
    print("sliding-window hit", sliding.hit(limit, "user-3"))
print("sliding-window remaining", sliding.get_window_stats(limit, "user-3").remaining)
moving = strategies.MovingWindowRateLimiter(store)
for i in range(5):
    print("moving-window hit", moving.hit(limit, "user-4"))
print("moving-window remaining", moving.get_window_stats(limit, "user-4").remaining)
print("OK")
