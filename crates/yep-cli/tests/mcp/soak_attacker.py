"""The attacker of the `yep mcp serve --http` soak test: idle connections, slowloris headers
and sessions that are opened and never closed, all at once.

Usage: soak_attacker.py HOST PORT TOKEN IDLE SLOW SESSIONS
Prints one JSON line: how many of each it managed.
"""

import http.client
import json
import resource
import socket
import sys
import threading
import time

host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
idle_n, slow_n, sessions_n = (int(a) for a in sys.argv[4:7])

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = idle_n + slow_n + 256
if hard == resource.RLIM_INFINITY or hard >= want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
else:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

held = []
counts = {"idle": 0, "slow": 0, "sessions": 0, "session_errors": 0}


def connect():
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((host, port))
        return s
    except OSError:
        s.close()
        return None


def idle():
    for _ in range(idle_n):
        s = connect()
        if s is not None:
            held.append(s)
            counts["idle"] += 1


def slowloris():
    socks = []
    for _ in range(slow_n):
        s = connect()
        if s is None:
            continue
        try:
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(s)
            counts["slow"] += 1
        except OSError:
            s.close()
    # One more header byte every half second, for as long as the server keeps them.
    for _ in range(20):
        time.sleep(0.5)
        for s in socks:
            try:
                s.sendall(b"X")
            except OSError:
                pass
    held.extend(socks)


def sessions():
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}}})
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    for _ in range(sessions_n):
        try:
            c = http.client.HTTPConnection(host, port, timeout=10)
            c.request("POST", "/mcp", body, headers)
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200 and r.getheader("mcp-session-id"):
                counts["sessions"] += 1
            else:
                counts["session_errors"] += 1
        except OSError:
            counts["session_errors"] += 1


threads = [threading.Thread(target=f) for f in (idle, slowloris, sessions)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(counts), flush=True)
