"""redis_py_cycle.py: redis-py's Lock in bench/cycle.lua (Debian's python3-redis).

usage: /usr/bin/python3 redis_py_cycle.py HOST PORT NAME ITERATIONS [CA]

With CA: over TLS (ssl=True, the server verified against CA, by name).

One uncontended cycle per iteration: Lock(timeout=10).acquire(blocking=False)
(SET NX PX) then release() (its compare-and-delete script, EVALSHA). Prints
one line "cycle <ns>" per iteration, at the end; exits non-zero when an
acquire is refused.
"""
import sys
import time

import redis


def main():
    host, port, name, iterations = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    if len(sys.argv) > 5:
        client = redis.Redis(host=host, port=port, ssl=True, ssl_ca_certs=sys.argv[5])
    else:
        client = redis.Redis(host=host, port=port)
    out = []
    cpu0 = time.process_time_ns()
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        lock = client.lock(name, timeout=10, blocking=False)
        if not lock.acquire():
            sys.exit("redis_py_cycle: acquire refused: the name is not ours alone")
        lock.release()
        out.append("cycle %d" % (time.perf_counter_ns() - t0))
    out.append("cpu_ns %d" % (time.process_time_ns() - cpu0))
    sys.stdout.write("\n".join(out) + "\n")
    client.close()


main()
