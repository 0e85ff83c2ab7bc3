-- Sliding Window Counter — sliding_window.lua reading the server's clock
-- KEYS[1] = current window key
-- KEYS[2] = previous window key
-- ARGV[1] = limit          (int)
-- ARGV[2] = window_seconds (int)
-- ARGV[3] = request cost   (int, default 1)
-- Returns: { allowed (0|1), new_estimated_count, retry_after_seconds }
-- Time comes from redis.call('TIME'), never from the caller, so gateways with
-- skewed clocks agree on window boundaries.

local limit        = tonumber(ARGV[1])
local window       = tonumber(ARGV[2])
local cost         = tonumber(ARGV[3])
local time         = redis.call('TIME')
local now          = tonumber(time[1]) + tonumber(time[2]) / 1000000
local window_start = math.floor(now / window) * window
local elapsed      = now - window_start

local prev_count = tonumber(redis.call('GET', KEYS[2])) or 0
local curr_count = tonumber(redis.call('GET', KEYS[1])) or 0
local weight     = (window - elapsed) / window
local estimated  = math.floor(prev_count * weight) + curr_count

if estimated + cost > limit then
    local retry_after = math.ceil(window - elapsed)
    return {0, estimated, retry_after}   -- denied
end

redis.call('INCR',   KEYS[1])
redis.call('EXPIRE', KEYS[1], window * 2)  -- keep prev + curr window alive
return {1, estimated + cost, 0}            -- allowed
