"""redis-py (Debian's python3-redis) logging in as the users of e2e's ACL file, against the
server at argv[1]:argv[2]; prints one line per operation, so that the output against tallyd
can be compared with the output against redis-server."""
import sys

import redis

host, port = sys.argv[1], int(sys.argv[2])


def show(what, f):
    try:
        print(what, "->", repr(f()))
    except Exception as e:  # the class and the text are what a program sees
        print(what, "->", type(e).__name__ + ":", e)


def client(user, password):
    return redis.Redis(host=host, port=port, username=user, password=password, socket_timeout=10)


admin = client("admin", "adminpw")
show("admin flushall", admin.flushall)
show("admin set", lambda: admin.set("app:1", "v"))
show("admin set other", lambda: admin.set("other", "v"))

ro = client("ro", "ropw")
show("ro get", lambda: ro.get("other"))
show("ro set", lambda: ro.set("other", "x"))
show("ro incr", lambda: ro.incr("n"))
show("ro flushall", ro.flushall)
show("ro whoami", lambda: ro.execute_command("ACL", "WHOAMI"))

app = client("app", "apppw")
show("app whoami", lambda: app.execute_command("ACL", "WHOAMI"))
show("app flushall", app.flushall)
show("app keys", lambda: app.keys("*"))
show("app set own key", lambda: app.set("app:2", "w"))
show("app get own key", lambda: app.get("app:2"))
show("app get other key", lambda: app.get("other"))
show("app set other key", lambda: app.set("other", "x"))
show("app mset mixed", lambda: app.mset({"app:3": "1", "other": "2"}))
show("app pipeline", lambda: app.pipeline(transaction=True).set("app:4", "v").incr("app:n").execute())
show("app transaction with other key", lambda: app.pipeline(transaction=True).set("app:5", "v").set("other", "x").execute())
show("app get app:5", lambda: app.get("app:5"))
show("admin dbsize", admin.dbsize)
show("admin get other", lambda: admin.get("other"))

show("wrong password", lambda: client("ro", "nope").ping())
show("no such user", lambda: client("nosuch", "x").ping())
show("user off", lambda: client("gone", "offpw").ping())
show("no login", lambda: redis.Redis(host=host, port=port, socket_timeout=10).get("other"))
show("default password", lambda: redis.Redis(host=host, port=port, password="defpw", socket_timeout=10).get("other"))
