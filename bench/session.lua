-- wrk script: each request presents the next session token (cycling) as `Authorization: Bearer`, to the
-- path given as the second argument (/auth/session, or /app/ behind auth_request).
--   wrk ... -s bench/session.lua URL -- SESSIONS_FILE PATH
local sessions = {}
local next_session = 1
local path = "/auth/session"
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

function init(args)
  for line in io.lines(args[1]) do sessions[#sessions + 1] = line end
  if args[2] then path = args[2] end
  -- Spread the threads over the list.
  next_session = (id * 7919) % #sessions + 1
end

function request()
  local session = sessions[next_session]
  next_session = next_session % #sessions + 1
  return wrk.format("GET", path, {["Authorization"] = "Bearer " .. session})
end

-- Optional pacing for the "half the peak rate" run: BENCH_DELAY_MS (may be fractional) between requests of
-- one connection. wrk takes whole milliseconds, so a fraction is met on average by rounding up at random.
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
if pause > 0 then
  local whole = math.floor(pause)
  local fraction = pause - whole
  function delay()
    if math.random() < fraction then return whole + 1 end
    return whole
  end
end
