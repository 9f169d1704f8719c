-- wrk script: each request signs in a different user with the next pre-minted ID token.
local tokens = {}
local next_token = 1
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

function init(args)
  for line in io.lines(args[1]) do tokens[#tokens + 1] = line end
  -- Spread the threads over the list so they do not sign the same users in.
  next_token = (id * 7919) % #tokens + 1
end

function request()
  local token = tokens[next_token]
  next_token = next_token % #tokens + 1
  return wrk.format("POST", "/tokensignin", {["Content-Type"] = "application/json"}, '{"idToken":"' .. token .. '"}')
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
