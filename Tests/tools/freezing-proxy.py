#!/usr/bin/env python3
"""A TCP proxy for tests: a server that goes silent without closing anything.

Usage: freezing-proxy.py HOST PORT
Listens on 127.0.0.1 (a free port, printed on the first line of standard output) and forwards
every connection to HOST:PORT. After SIGUSR1 it forwards nothing more, in either direction, and
keeps every connection open, accepting new ones and never answering: what a client sees when a
database or broker host vanishes behind a network fault. SIGTERM ends it.
"""
import signal
import socket
import sys
import threading

frozen = threading.Event()
held = []


def pump(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            if frozen.is_set():
                continue  # swallowed: the peer hears nothing
            sink.sendall(data)
    except OSError:
        pass
    if not frozen.is_set():
        for end in (source, sink):
            try:
                end.close()
            except OSError:
                pass


def main():
    target = (sys.argv[1], int(sys.argv[2]))
    signal.signal(signal.SIGUSR1, lambda *_: frozen.set())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        if frozen.is_set():
            held.append(client)
            continue
        try:
            upstream = socket.create_connection(target)
        except OSError:
            client.close()
            continue
        held.extend([client, upstream])
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


if __name__ == "__main__":
    main()
