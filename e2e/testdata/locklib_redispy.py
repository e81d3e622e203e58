#!/usr/bin/env python3
"""redis-py's Lock against a server (tallyd or redis-server): acquire, extend, reacquire,
release from another connection of the pool, blocking acquire with a timeout, and
LockNotOwnedError after expiry. Prints one line per step (the test compares the servers'
transcripts) and exits 1 if any step is not what the library's users rely on."""
import sys
import time

import redis
from redis.exceptions import LockNotOwnedError

host, port = sys.argv[1], int(sys.argv[2])
r = redis.Redis(host=host, port=port, socket_timeout=10)
pool = r.connection_pool
failed = False


def step(name, got, want):
    """Prints the step's result and remembers one that is not want."""
    global failed
    print(f"{name}: {got}" + ("" if got == want else f"  <-- want {want}"))
    if got != want:
        failed = True


def timed_acquire(lock):
    """Acquires lock, blocking, and returns what acquire said and how long it took."""
    t0 = time.monotonic()
    got = lock.acquire()
    return got, time.monotonic() - t0


def sockname(conn):
    return conn._sock.getsockname() if conn._sock else None


r.delete("job", "job2", "job3")

# Acquire, extend (added to the TTL, then replacing it), reacquire.
lock = r.lock("job", timeout=5)
step("acquire", lock.acquire(blocking=False), True)
step("owned", lock.owned(), True)
step("pttl after acquire near 5000", 4000 < r.pttl("job") <= 5000, True)
step("extend 5", lock.extend(5), True)
step("pttl after extend near 10000", 9000 < r.pttl("job") <= 10000, True)
step("extend replace 2", lock.extend(2, replace_ttl=True), True)
step("pttl after replace near 2000", 1000 < r.pttl("job") <= 2000, True)
step("reacquire", lock.reacquire(), True)
step("pttl after reacquire near 5000", 4000 < r.pttl("job") <= 5000, True)
other = r.lock("job", timeout=5)
step("second lock acquire while held", other.acquire(blocking=False), False)

# Release from another connection of the pool: hold the connection the acquire used, so the
# release's EVALSHA must open a new one.
held = pool.get_connection("_")
first = sockname(held)
step("release from another connection", lock.release() is None, True)
step("pool made a second connection", pool._created_connections >= 2, True)
second = [sockname(c) for c in pool._available_connections]
step("release ran on a connection other than the acquire's", first not in second and len(second) >= 1, True)
pool.release(held)
step("key gone after release", r.exists("job"), 0)

# Blocking acquire with a timeout: fails while another holds the lock, succeeds after its
# release, and after its expiry.
holder = r.lock("job2", timeout=10)
step("holder acquire", holder.acquire(blocking=False), True)
waiter = r.lock("job2", timeout=5, blocking_timeout=0.3, sleep=0.05)
got, waited = timed_acquire(waiter)
step("blocking acquire while held", got, False)
step("it waited about blocking_timeout", 0.25 <= waited < 2, True)
holder.release()
step("blocking acquire after release", waiter.acquire(), True)
waiter.release()
short = r.lock("job2", timeout=0.4)
step("short holder acquire", short.acquire(blocking=False), True)
waiter = r.lock("job2", timeout=5, blocking_timeout=3, sleep=0.05)
got, waited = timed_acquire(waiter)
step("blocking acquire after expiry", got, True)
step("it waited for the expiry", 0.2 <= waited < 2.5, True)
waiter.release()

# After expiry and another owner, release and extend raise LockNotOwnedError; the new owner
# keeps the lock.
old = r.lock("job3", timeout=0.2)
step("old acquire", old.acquire(blocking=False), True)
time.sleep(0.35)
new = r.lock("job3", timeout=5)
step("new acquire after expiry", new.acquire(blocking=False), True)
try:
    old.extend(1)
    step("old extend", "no error", "LockNotOwnedError")
except LockNotOwnedError as e:
    step("old extend", type(e).__name__, "LockNotOwnedError")
try:
    old.release()
    step("old release", "no error", "LockNotOwnedError")
except LockNotOwnedError as e:
    step("old release", type(e).__name__, "LockNotOwnedError")
step("new still owned", new.owned(), True)
new.release()
step("key gone after new release", r.exists("job3"), 0)

# The context manager form.
with r.lock("job4", timeout=5, blocking_timeout=1) as l:
    step("with block holds", l.owned(), True)
step("released after with", r.exists("job4"), 0)

sys.exit(1 if failed else 0)
