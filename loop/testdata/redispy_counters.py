"""Counters through redis-py: transactions, WATCH, MGET/MSET, read-your-writes.

Run as: python3 redispy_counters.py HOST PORT. Prints one JSON object of every answer
(scalars as strings) and exits 1 with a message if an answer is not the one expected.
Reply types are compared by e2e/redisdiff_test.go, on the wire.
TestRedisPy runs it against tallyd and, where installed, against redis-server, and
compares the two outputs.
"""
import json
import sys

import redis


def norm(v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, Exception):
        return "error: " + str(v).split(" ")[0]
    return str(v)


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    r = redis.Redis(host=host, port=port, decode_responses=True, socket_timeout=10)
    r2 = redis.Redis(host=host, port=port, decode_responses=True, socket_timeout=10)
    out = {}
    failures = []

    def expect(name, got, want):
        got = norm(got)
        out[name] = got
        if got != want:
            failures.append("%s: got %r, want %r" % (name, got, want))

    r.flushdb()

    # A transaction of INCRs applies whole, once.
    p = r.pipeline(transaction=True)
    p.incr("c").incrby("c", 10).decr("c").set("s", "v").get("s")
    expect("tx", p.execute(), ["1", "11", "10", True, "v"])
    expect("tx.after", r.get("c"), "10")

    # Errors inside EXEC are per command; the others still apply.
    p = r.pipeline(transaction=True)
    p.incr("s").incr("c")
    expect("tx.errors", p.execute(raise_on_error=False), ["error: value", "11"])

    # WATCH and a conflicting write by another client: EXEC aborts (WatchError), nothing
    # of the transaction applies.
    r.set("w", "0")
    p = r.pipeline(transaction=True)
    p.watch("w")
    seen = p.get("w")
    r2.set("w", "theirs")
    p.multi()
    p.set("w", "mine").incr("c")
    try:
        p.execute()
        expect("watch.conflict", "executed", "WatchError")
    except redis.WatchError:
        expect("watch.conflict", "WatchError", "WatchError")
    expect("watch.seen", seen, "0")
    expect("watch.after", r.mget("w", "c"), ["theirs", "11"])

    # The same without a conflict runs; redis-py's transaction() helper retries on conflict.
    def bump(pipe):
        n = int(pipe.get("w2") or 0)
        pipe.multi()
        pipe.set("w2", n + 5)

    expect("watch.helper", r.transaction(bump, "w2"), [True])
    expect("watch.helper.after", r.get("w2"), "5")

    # MGET, MSET, MSETNX.
    expect("mset", r.mset({"a": "1", "b": "2"}), True)
    expect("mget", r.mget(["a", "b", "nokey"]), ["1", "2", None])
    expect("msetnx.exists", r.msetnx({"a": "9", "z": "1"}), False)
    expect("msetnx.none", r.mget(["a", "z"]), ["1", None])
    expect("msetnx.new", r.msetnx({"y": "1", "z": "2"}), True)
    expect("msetnx.after", r.mget(["y", "z"]), ["1", "2"])

    # Read your writes in a pipeline: an expired key is gone for the next command.
    p = r.pipeline(transaction=False)
    p.set("k", "v").expire("k", 0).get("k").exists("k")
    expect("ryw", p.execute(), [True, True, None, "0"])

    # A transaction that is discarded on a queueing error applies nothing.
    try:
        r.execute_command("MULTI")
        r.execute_command("INCR", "c")
        try:
            r.execute_command("GET")
        except redis.ResponseError as e:
            expect("execabort.queue", e, "error: wrong")
        r.execute_command("EXEC")
        expect("execabort", "executed", "error: Transaction")
    except redis.ResponseError as e:
        expect("execabort", e, "error: Transaction")
    expect("execabort.after", r.get("c"), "11")

    # Counter groups as hashes: one entity, several counters, read at once.
    expect("hincrby", r.hincrby("likes:post7", "up", 3), "3")
    expect("hincrby.neg", r.hincrby("likes:post7", "down", -2), "-2")
    expect("hset", r.hset("likes:post7", mapping={"views": "10", "up": "4"}), "1")
    expect("hgetall", r.hgetall("likes:post7"), {"up": "4", "down": "-2", "views": "10"})
    expect("hmget", r.hmget("likes:post7", ["up", "nofield", "views"]), ["4", None, "10"])
    expect("hget", r.hget("likes:post7", "down"), "-2")
    expect("hlen", r.hlen("likes:post7"), "3")
    expect("hexists", [r.hexists("likes:post7", "up"), r.hexists("likes:post7", "x")], [True, False])
    expect("hkeys", sorted(r.hkeys("likes:post7")), ["down", "up", "views"])
    expect("hvals", sorted(r.hvals("likes:post7")), ["-2", "10", "4"])
    expect("hdel", r.hdel("likes:post7", "down", "nofield"), "1")
    expect("type.hash", r.type("likes:post7"), "hash")
    for name, call in (("get", lambda: r.get("likes:post7")), ("incr", lambda: r.incr("likes:post7")),
                       ("hincrby.string", lambda: r.hincrby("s", "f", 1))):
        try:
            call()
            expect("wrongtype." + name, "answered", "error: WRONGTYPE")
        except redis.ResponseError as e:
            expect("wrongtype." + name, e, "error: WRONGTYPE")
    try:
        r.hincrby("likes:post7", "views", 9223372036854775807)
        expect("hincrby.overflow", "answered", "error: increment")
    except redis.ResponseError as e:
        expect("hincrby.overflow", e, "error: increment")
    expect("mget.hash", r.mget("likes:post7", "a"), [None, "1"])
    expect("hdel.last", r.hdel("likes:post7", "up", "views"), "2")
    expect("hdel.gone", r.exists("likes:post7"), "0")
    p = r.pipeline(transaction=True)
    p.hincrby("g", "a", 1).hincrby("g", "b", 2).hgetall("g")
    expect("hash.tx", p.execute(), ["1", "2", {"a": "1", "b": "2"}])

    # SCAN with a real cursor: every key once over a full walk, a few per call.
    r.mset({"scan:%d" % i: str(i) for i in range(50)})
    seen = set()
    cursor, calls = 0, 0
    while True:
        cursor, keys = r.scan(cursor, match="scan:*", count=7)
        seen.update(keys)
        calls += 1
        if cursor == 0:
            break
    expect("scan.keys", len(seen), "50")
    expect("scan.steps", calls > 3, True)
    expect("scan_iter", len(set(r.scan_iter(match="scan:1*", count=5))), "11")
    expect("keys", sorted(r.keys("scan:4*")), ["scan:4", "scan:40", "scan:41", "scan:42", "scan:43",
                                                "scan:44", "scan:45", "scan:46", "scan:47", "scan:48", "scan:49"])

    # Expiry arithmetic (issue 12, item 7): what Redis refuses is refused with its error,
    # what it accepts keeps exactly the TTL asked for, however far.
    def err(name, call, want):
        try:
            expect(name, call(), want)
        except redis.ResponseError as e:
            expect(name, str(e), want)

    big = 9223372036854775807
    r.set("ex", "v")
    err("expire.max", lambda: r.expire("ex", big), "invalid expire time in 'expire' command")
    expect("expire.max.kept", [r.get("ex"), r.ttl("ex")], ["v", "-1"])
    err("expire.min", lambda: r.execute_command("EXPIRE", "ex", -big - 1), "invalid expire time in 'expire' command")
    err("pexpire.max", lambda: r.pexpire("ex", big), "invalid expire time in 'pexpire' command")
    err("expireat.max", lambda: r.execute_command("EXPIREAT", "ex", big), "invalid expire time in 'expireat' command")
    err("expire.nokey.max", lambda: r.expire("nokey", big), "invalid expire time in 'expire' command")
    err("expire.notint", lambda: r.execute_command("EXPIRE", "ex", "soon"), "value is not an integer or out of range")
    expect("ttl.persistent", r.ttl("ex"), "-1")
    expect("pexpire.far", r.pexpire("ex", 9223370000000000000), True)
    expect("pttl.far", abs(r.pttl("ex") - 9223370000000000000) < 60000, True)
    expect("expire.10M", r.expire("ex", 10000000), True)
    expect("ttl.10M", r.ttl("ex"), "10000000")
    expect("pttl.10M", 10000000000 - 60000 < r.pttl("ex") <= 10000000000, True)
    expect("expire.45d", r.expire("ex", 3932041), True)
    expect("ttl.45d", r.ttl("ex"), "3932041")
    expect("expire.odd", r.pexpire("ex", 70001), True)
    expect("pttl.odd", 70001 - 1000 < r.pttl("ex") <= 70001, True)
    expect("setex.huge", r.setex("ex2", 99999999999999, "v"), True)
    expect("ttl.setex.huge", r.ttl("ex2"), "99999999999999")
    err("setex.overflow", lambda: r.setex("ex2", 9999999999999999, "v"), "invalid expire time in 'setex' command")
    err("setex.zero", lambda: r.setex("ex2", 0, "v"), "invalid expire time in 'setex' command")
    err("setex.notint", lambda: r.execute_command("SETEX", "ex2", "x", "v"), "value is not an integer or out of range")
    err("psetex.max", lambda: r.psetex("ex2", big, "v"), "invalid expire time in 'psetex' command")
    err("set.ex.overflow", lambda: r.set("ex2", "v", ex=9223372036854775), "invalid expire time in 'set' command")
    err("set.px.max", lambda: r.set("ex2", "v", px=big), "invalid expire time in 'set' command")
    expect("set.ex.far", r.set("ex3", "v", ex=5000000000), True)
    expect("ttl.set.ex.far", r.ttl("ex3"), "5000000000")
    expect("pexpireat.max", r.pexpireat("ex3", big), True)
    expect("pttl.pexpireat.max", r.pttl("ex3") > 9223370000000000000, True)
    expect("expireat.past", r.expireat("ex3", 1), True)
    expect("expireat.past.gone", [r.get("ex3"), r.exists("ex3")], [None, "0"])
    r.set("ex4", "1", ex=100000000)
    r.incr("ex4")
    r.hset("ex5", "f", "1")
    r.expire("ex5", 200000000)
    r.hincrby("ex5", "f", 1)
    expect("ttl.kept", [r.ttl("ex4"), r.get("ex4"), r.ttl("ex5")], ["100000000", "2", "200000000"])
    expect("expire.neg", r.expire("ex2", -5), True)
    expect("expire.neg.gone", r.exists("ex2"), "0")

    # Distinct keys are distinct (issue 12, item 8): names differing only in case, a
    # 32-hex-digit name and the 16 bytes it decodes to, "abc" and "\x00abc".
    rb = redis.Redis(host=host, port=port, socket_timeout=10)  # bytes, for names not UTF-8

    def text(v):
        return v.decode() if isinstance(v, bytes) else norm(v)
    hexname = b"550e8400e29b41d4a716446655440000"
    names = [hexname, hexname.upper(), bytes.fromhex(hexname.decode()), b"abc", b"\x00abc",
             b"0123456789abcdef", b"\x000123456789abcdef", b"", b"\x00"]
    for i, n in enumerate(names):
        rb.set(n, "v%d" % i)
    expect("distinct.get", [text(x) for x in rb.mget(names)], ["v%d" % i for i in range(len(names))])
    expect("distinct.del", rb.delete(b"abc"), "1")
    expect("distinct.after.del", [rb.exists(b"\x00abc"), text(rb.get(b"\x00abc"))], ["1", "v4"])
    rb.set(hexname, "10")
    rb.set(hexname.upper(), "20")
    expect("distinct.incr", [rb.incr(hexname), rb.incrby(hexname.upper(), 5), text(rb.get(hexname))], ["11", "25", "11"])
    rb.delete(*names)

    # HELLO 2: the names of the fields.
    h = r.execute_command("HELLO", "2")
    expect("hello", h[0::2], ["server", "version", "proto", "id", "mode", "role", "modules"])

    print(json.dumps(out, sort_keys=True))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)


main()
