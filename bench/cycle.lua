-- wrk script shared by bench/signin and bench/session: each request presents the next secret from a file
-- (cycling; threads start at different places so they do not present the same ones at once).
--   wrk ... -s bench/cycle.lua URL -- FILE idtoken          POST /tokensignin {"idToken": <line>}
--   wrk ... -s bench/cycle.lua URL -- FILE bearer PATH      GET PATH with Authorization: Bearer <line>
local secrets = {}
local next_secret = 1
local kind = "idtoken"
local path = "/tokensignin"
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

-- The requests are formatted once, in init: the load generator shares the cores with what it measures, so
-- it should spend as little as it can per request.
function init(args)
  kind = args[2] or kind
  path = args[3] or path
  for secret in io.lines(args[1]) do
    if kind == "bearer" then
      secrets[#secrets + 1] = wrk.format("GET", path, {["Authorization"] = "Bearer " .. secret})
    else
      secrets[#secrets + 1] = wrk.format("POST", path, {["Content-Type"] = "application/json"},
                                         '{"idToken":"' .. secret .. '"}')
    end
  end
  next_secret = (id * 7919) % #secrets + 1
end

function request()
  local formatted = secrets[next_secret]
  next_secret = next_secret % #secrets + 1
  return formatted
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
