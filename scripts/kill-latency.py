#!/usr/bin/env python3
"""How long after `kill -9` of neli-run is everything its command started gone?

The command leaves N-1 `setsid` sleeps and a double-forked `setsid` one that
ignores SIGTERM, all holding a flock; the time is from the kill until the
lock is free. The lease (8 s) is far off: this is the shim's own sweep.

usage: scripts/kill-latency.py [NELI_RUN [BROKER]]
       (defaults: target/release/neli-run, a dev broker on 127.0.0.1:19092:
        neli-run dev-broker --listen 127.0.0.1:19092 &)
"""
import subprocess, time, os, signal, fcntl, statistics, sys
B = sys.argv[1] if len(sys.argv) > 1 else "target/release/neli-run"
BROKER = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1:19092"
def held(lock):
    try:
        fd=os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX|fcntl.LOCK_NB); fcntl.flock(fd, fcntl.LOCK_UN); return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
res={}
for n in (2, 200):
    times=[]
    for rep in range(5):
        d=f"/tmp/kill-latency-{os.getpid()}-{n}-{rep}"; subprocess.run(["rm","-rf",d]); os.makedirs(d)
        script=f"for i in $(seq {n-1}); do setsid sleep 1000 & done; (setsid sh -c 'trap \"\" TERM; exec sleep 1000' &); sleep 0.5; touch {d}/ready; exec sleep 1000"
        p=subprocess.Popen([B,"-b",BROKER,"-g",f"kb-{os.getpid()}-{n}-{rep}","--session-timeout","10s","--heartbeat-deadline","8s","--","flock","-n",f"{d}/lock","sh","-c",script],stderr=subprocess.DEVNULL)
        t0=time.time()
        while not os.path.exists(f"{d}/ready"):
            time.sleep(0.01)
            if time.time()-t0>30: sys.exit("no start")
        os.kill(p.pid, signal.SIGKILL); k=time.monotonic(); p.wait()
        while held(f"{d}/lock"):
            time.sleep(0.001)
        times.append((time.monotonic()-k)*1000)
    res[n]=times
    print(f"{n} descendants (setsid'd, one ignoring TERM): kill -9 of neli-run until all gone: median {statistics.median(times):.1f} ms, max {max(times):.1f} ms, runs {[round(t,1) for t in times]}")
