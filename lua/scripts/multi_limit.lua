-- Batched multi-limit sliding window check: every limit of a request at once
-- Every limit that applies to a request, checked in one atomic call.
-- For limit i (1-based):
--   KEYS[2i-1] = current window key, KEYS[2i] = previous window key
--   ARGV[3i-2] = limit, ARGV[3i-1] = window_seconds, ARGV[3i] = cost
-- All or nothing: when any limit would be exceeded no counter moves.
-- Time comes from redis.call('TIME').
-- Returns: { allowed (0|1),
--            { remaining_1, ..., remaining_n },
--            { reset_1, ..., reset_n },        -- epoch second the window ends
--            retry_after_seconds }             -- largest among exceeded limits

local time  = redis.call('TIME')
local now   = tonumber(time[1]) + tonumber(time[2]) / 1000000
local count = #KEYS / 2

local estimated, window_starts = {}, {}
local allowed, retry_after = 1, 0
for i = 1, count do
    local limit  = tonumber(ARGV[3 * i - 2])
    local window = tonumber(ARGV[3 * i - 1])
    local cost   = tonumber(ARGV[3 * i])
    local window_start = math.floor(now / window) * window
    local elapsed      = now - window_start
    local prev_count = tonumber(redis.call('GET', KEYS[2 * i])) or 0
    local curr_count = tonumber(redis.call('GET', KEYS[2 * i - 1])) or 0
    local weight     = (window - elapsed) / window
    estimated[i]     = math.floor(prev_count * weight) + curr_count
    window_starts[i] = window_start
    if estimated[i] + cost > limit then
        allowed = 0
        local wait = math.ceil(window - elapsed)
        if wait > retry_after then retry_after = wait end
    end
end

local remaining, resets = {}, {}
for i = 1, count do
    local limit  = tonumber(ARGV[3 * i - 2])
    local window = tonumber(ARGV[3 * i - 1])
    local cost   = tonumber(ARGV[3 * i])
    local used   = estimated[i]
    if allowed == 1 then
        redis.call('INCRBY', KEYS[2 * i - 1], cost)
        redis.call('EXPIRE', KEYS[2 * i - 1], window * 2)
        used = used + cost
    end
    remaining[i] = math.max(0, limit - used)
    resets[i]    = window_starts[i] + window
end
return {allowed, remaining, resets, retry_after}
