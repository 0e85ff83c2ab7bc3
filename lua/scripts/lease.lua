-- Lease sync for tally-client's cached mode.
-- Reserves a node's local budget on the server, so other nodes and exact
-- checks count it, and gives back what a node did not use.
-- For limit i (1-based):
--   KEYS[3i-2] = current window key, KEYS[3i-1] = previous window key,
--   KEYS[3i]   = key the returned tokens were reserved on
--   ARGV[5i-4] = limit, ARGV[5i-3] = window_seconds,
--   ARGV[5i-2] = tokens to give back, ARGV[5i-1] = lease wanted,
--   ARGV[5i]   = cost to admit now (0 for a plain top-up)
-- All or nothing: when any limit cannot admit its cost, nothing is admitted
-- or leased. Time comes from redis.call('TIME').
-- Returns: { allowed (0|1), { remaining_i }, { reset_i }, retry_after,
--            { granted_i }, server_time_ms, free_in_ms }
-- retry_after is sliding_window.lua's (seconds to the end of the window of the
-- longest exceeded limit); free_in_ms is when the sliding estimate will
-- have decayed enough to admit the cost again (at most the same), which
-- the node uses for its deny cache.

local time = redis.call('TIME')
local now  = tonumber(time[1]) + tonumber(time[2]) / 1000000
local count = #KEYS / 3

for i = 1, count do
    local back = tonumber(ARGV[5 * i - 2])
    if back > 0 then
        local held = tonumber(redis.call('GET', KEYS[3 * i])) or 0
        local give = math.min(back, held)
        if give > 0 then
            redis.call('DECRBY', KEYS[3 * i], give)
        end
    end
end

local estimated, window_starts = {}, {}
local allowed, retry_after, free_in = 1, 0, 0
for i = 1, count do
    local limit  = tonumber(ARGV[5 * i - 4])
    local window = tonumber(ARGV[5 * i - 3])
    local cost   = tonumber(ARGV[5 * i])
    local window_start = math.floor(now / window) * window
    local elapsed      = now - window_start
    local prev_count = tonumber(redis.call('GET', KEYS[3 * i - 1])) or 0
    local curr_count = tonumber(redis.call('GET', KEYS[3 * i - 2])) or 0
    local weight     = (window - elapsed) / window
    estimated[i]     = math.floor(prev_count * weight) + curr_count
    window_starts[i] = window_start
    if estimated[i] + cost > limit then
        allowed = 0
        local wait = math.ceil(window - elapsed)
        if wait > retry_after then retry_after = wait end
        -- The previous window's weight falls by prev_count/window a second.
        local free = window - elapsed
        if prev_count > 0 and curr_count + cost <= limit then
            local over = estimated[i] + cost - limit
            free = math.min(free, over * window / prev_count)
        end
        if free > free_in then free_in = free end
    end
end

local remaining, resets, granted = {}, {}, {}
for i = 1, count do
    local limit  = tonumber(ARGV[5 * i - 4])
    local window = tonumber(ARGV[5 * i - 3])
    local want   = tonumber(ARGV[5 * i - 1])
    local cost   = tonumber(ARGV[5 * i])
    local grant  = 0
    if allowed == 1 then
        grant = math.max(0, math.min(want, limit - estimated[i] - cost))
        if cost + grant > 0 then
            redis.call('INCRBY', KEYS[3 * i - 2], cost + grant)
            redis.call('EXPIRE', KEYS[3 * i - 2], window * 2)
        end
        estimated[i] = estimated[i] + cost + grant
    end
    remaining[i] = math.max(0, limit - estimated[i])
    resets[i]    = window_starts[i] + window
    granted[i]   = grant
end
return {allowed, remaining, resets, retry_after, granted,
        tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000),
        math.ceil(free_in * 1000)}
