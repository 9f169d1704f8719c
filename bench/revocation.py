"""bench/revocation's measurement: how long after a revocation responder B still accepts the session from its cache.

Usage: revocation.py SOCKET_A SOCKET_B SESSIONS_FILE COUNT DBA_EVERY
For each of COUNT session tokens: check it through B until B answers 200 and once more (the second answer comes from
B's session cache), revoke it (POST /tokensignout through A, or every DBA_EVERY-th a DBA's UPDATE through libpq),
then check it through B in a tight loop until B refuses. The delay runs from A's answer (or the UPDATE's return,
after its commit) to the answer of B's first refusal; every poll is one FastCGI round trip to B, whose duration is
the resolution. Prints the figures; exits non-zero on anything unexpected (an answer that is neither 200 nor 401, a
session B never refuses within the bound).
"""
import ctypes
import ctypes.util
import hashlib
import math
import re
import sys
import time

import fastcgi

# A session B still accepts this long after its revocation counts as never refused (the cache promises 100 ms).
GIVE_UP_NS = 2_000_000_000


class Database:
    """The DBA's side: one libpq connection (the PG* variables of the bench's cluster), autocommit."""

    def __init__(self):
        self.pq = ctypes.CDLL(ctypes.util.find_library("pq") or "libpq.so.5")
        self.pq.PQconnectdb.restype = ctypes.c_void_p
        self.pq.PQconnectdb.argtypes = [ctypes.c_char_p]
        self.pq.PQstatus.argtypes = [ctypes.c_void_p]
        self.pq.PQerrorMessage.restype = ctypes.c_char_p
        self.pq.PQerrorMessage.argtypes = [ctypes.c_void_p]
        self.pq.PQexecParams.restype = ctypes.c_void_p
        self.pq.PQexecParams.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                         ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        self.pq.PQresultStatus.argtypes = [ctypes.c_void_p]
        self.pq.PQcmdTuples.restype = ctypes.c_char_p
        self.pq.PQcmdTuples.argtypes = [ctypes.c_void_p]
        self.pq.PQclear.argtypes = [ctypes.c_void_p]
        self.pq.PQfinish.argtypes = [ctypes.c_void_p]
        self.connection = self.pq.PQconnectdb(b"application_name=bench-revocation")
        if self.pq.PQstatus(self.connection) != 0:   # CONNECTION_OK
            raise RuntimeError("libpq: " + self.pq.PQerrorMessage(self.connection).decode())

    def revoke(self, token):
        """Revokes the session of TOKEN as a DBA would by hand; returns when the UPDATE has committed."""
        values = (ctypes.c_char_p * 1)(hashlib.sha256(token.encode()).hexdigest().encode())
        result = self.pq.PQexecParams(
            self.connection,
            b"UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'operator'"
            b" WHERE token_hash = decode($1, 'hex') AND revoked_at IS NULL",
            1, None, values, None, None, 0)
        try:
            if self.pq.PQresultStatus(result) != 1:   # PGRES_COMMAND_OK
                raise RuntimeError("UPDATE failed: " + self.pq.PQerrorMessage(self.connection).decode())
            if self.pq.PQcmdTuples(result) != b"1":
                raise RuntimeError("UPDATE revoked no session")
        finally:
            self.pq.PQclear(result)

    def close(self):
        self.pq.PQfinish(self.connection)


def cache_figures(responder):
    """B's session cache as its /metrics says: ({result: lookups}, usable)."""
    status, body = responder.send(fastcgi.encode("GET", "/metrics"))
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    text = body.decode()
    lookups = {m[0]: float(m[1]) for m in re.findall(r'^tokensignin_session_cache_lookups_total\{result="(\w+)"\} (\S+)$', text, re.M)}
    usable = re.search(r"^tokensignin_session_cache_usable (\S+)$", text, re.M)
    return lookups, usable is not None and float(usable.group(1)) == 1


def quantile(values, q):
    """The q-quantile by the nearest rank (p99 of 1000: the 990th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(len(ordered) * q) - 1))] if ordered else 0


def summary(label, delays):
    ms = [d / 1e6 for d in delays]
    return (f"{label}: max {max(ms):.3f} ms, p99 {quantile(ms, 0.99):.3f} ms, p50 {quantile(ms, 0.50):.3f} ms"
            f" over {len(ms)}") if ms else f"{label}: none"


def main():
    socket_a, socket_b, sessions_file, count, dba_every = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    with open(sessions_file) as lines:
        tokens = [line.strip() for line in lines if line.strip()][:count]
    if len(tokens) < count:
        sys.exit(f"only {len(tokens)} sessions for {count} revocations")
    a, b, database = fastcgi.Connection(socket_a), fastcgi.Connection(socket_b), Database()

    # B's cache answers only while its heartbeat through PostgreSQL comes back: wait for the first one.
    deadline = time.monotonic() + 10
    while not cache_figures(b)[1]:
        if time.monotonic() > deadline:
            sys.exit("responder B's session cache never became usable (tokensignin_session_cache_usable)")
        time.sleep(0.05)
    lookups_before, _ = cache_figures(b)

    delays = {"sign-out": [], "UPDATE": []}
    round_trips, first_poll, never, polls_total = [], 0, 0, 0
    for index, token in enumerate(tokens):
        check = fastcgi.encode("GET", "/auth/session", [("Authorization", "Bearer " + token)])
        for attempt in range(50):   # the first check asks PostgreSQL and keeps the answer
            status, _ = b.send(check)
            if status == 200:
                break
        else:
            sys.exit(f"session {index + 1}: responder B never accepted it (last answer {status})")
        status, _ = b.send(check)   # from B's memory now
        if status != 200:
            sys.exit(f"session {index + 1}: responder B answered {status} to the second check")

        if dba_every > 0 and index % dba_every == dba_every - 1:
            kind = "UPDATE"
            database.revoke(token)
        else:
            kind = "sign-out"
            status, _ = a.send(fastcgi.encode("POST", "/tokensignout", [("Authorization", "Bearer " + token)]))
            if status != 204:
                sys.exit(f"session {index + 1}: sign-out through responder A answered {status}")
        revoked = time.perf_counter_ns()

        polls = 0
        while True:
            sent = time.perf_counter_ns()
            status, _ = b.send(check)
            answered = time.perf_counter_ns()
            round_trips.append(answered - sent)
            polls += 1
            if status == 401:
                delays[kind].append(answered - revoked)
                first_poll += polls == 1
                break
            if status != 200:
                sys.exit(f"session {index + 1}: responder B answered {status} while polled")
            if answered - revoked > GIVE_UP_NS:
                never += 1
                break
        polls_total += polls

    lookups_after, _ = cache_figures(b)
    a.close(), b.close(), database.close()
    hits = {key: int(lookups_after.get(key, 0) - lookups_before.get(key, 0)) for key in ("hit", "miss", "unusable")}
    every = delays["sign-out"] + delays["UPDATE"]
    print(f"revocations: {len(tokens)} ({len(delays['sign-out'])} by POST /tokensignout through A, "
          f"{len(delays['UPDATE'])} by a DBA's UPDATE of signin.sessions)")
    print("  " + summary("delay from A's answer (or the UPDATE's commit) to B's first refusal", every))
    print("    " + summary("by sign-out", delays["sign-out"]))
    print("    " + summary("by UPDATE", delays["UPDATE"]))
    print(f"  refused at the first poll: {first_poll} of {len(tokens)}; polls per revocation {polls_total / len(tokens):.2f};"
          f" never refused within {GIVE_UP_NS // 1_000_000} ms: {never}")
    print(f"  resolution: one poll is one FastCGI round trip to B (GET /auth/session), p50 {quantile(round_trips, 0.5) / 1e3:.0f} us,"
          f" p99 {quantile(round_trips, 0.99) / 1e3:.0f} us, max {max(round_trips) / 1e3:.0f} us; a delay is measured to the"
          " answer of the first refused poll, so it overstates the true one by at most one round trip")
    print(f"  B's session cache during the run: {hits['hit']} checks answered from memory, {hits['miss']} asked PostgreSQL"
          f" and kept, {hits['unusable']} asked PostgreSQL while the cache was not usable")
    if never:
        sys.exit(f"{never} revoked sessions were still accepted by B {GIVE_UP_NS // 1_000_000} ms after their revocation")


if __name__ == "__main__":
    main()
