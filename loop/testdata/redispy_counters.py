"""Counters through redis-py: transactions, WATCH, MGET/MSET, read-your-writes.

Run as: python3 redispy_counters.py HOST PORT. Prints one JSON object of every answer
(scalars as strings, so that a NUMBER tallyd shows as an integer compares equal to the
string Redis shows) and exits 1 with a message if an answer is not the one expected.
TestRedisPy runs it against tallyd and, where installed, against redis-server, and
compares the two outputs.
"""
import json
import sys

import redis


def norm(v):
    if v is None or isinstance(v, bool):
        return v
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

    # HELLO 2: the names of the fields.
    h = r.execute_command("HELLO", "2")
    expect("hello", h[0::2], ["server", "version", "proto", "id", "mode", "role", "modules"])

    print(json.dumps(out, sort_keys=True))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)


main()
