#!/usr/bin/env python3
"""Light I/O load: one HTTP keep-alive connection, one request every PERIOD
seconds for SECS seconds, against a server already listening on PORT whose
process is PID. Prints the server's CPU (user + system, summed over its
threads from /proc, in clock ticks) and voluntary context switches per
request.

    cargo run --release --features hyper --example http_server -- \
        --addr 127.0.0.1:8097 --secs 13 --workers 2 &
    scripts/io-light.py 8097 0.002 10 $(pgrep -f 'http_server --addr 127.0.0.1:8097')
"""
import socket, time, sys, os, glob
port=int(sys.argv[1]); period=float(sys.argv[2]); secs=float(sys.argv[3]); pid=int(sys.argv[4])
def stat():
    ut=st=0; csw=0
    for t in glob.glob(f'/proc/{pid}/task/*'):
        try:
            f=open(t+'/stat').read().rsplit(')',1)[1].split()
            ut+=int(f[11]); st+=int(f[12])
            for l in open(t+'/status'):
                if l.startswith('voluntary_ctxt_switches'): csw+=int(l.split()[1])
        except Exception: pass
    return (ut+st)/os.sysconf('SC_CLK_TCK'), csw
s=socket.create_connection(('127.0.0.1',port)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,1)
req=b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
# warm
for _ in range(50):
    s.sendall(req); s.recv(4096)
c0,w0=stat(); t0=time.time(); n=0
nxt=t0
while time.time()-t0<secs:
    s.sendall(req); s.recv(4096); n+=1
    nxt+=period
    d=nxt-time.time()
    if d>0: time.sleep(d)
c1,w1=stat()
print(f"{n} requests, server CPU {1e6*(c1-c0)/n:.1f} us/request, {(w1-w0)/n:.2f} csw/request")
