"""The real app under uvicorn on a free 127.0.0.1 port, in a thread, for tests that use real
HTTP clients (the openai SDK, the MCP SDK, httpx streaming)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn


class LiveServer:
    """``with LiveServer(app) as base_url:`` serves ``app`` until the block ends (uvicorn's own
    shutdown: the app's lifespan stops its workers)."""

    def __init__(self, app):
        self.app = app
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.sock, self.port = sock, sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline, "API did not start"
            assert self.thread.is_alive(), "API stopped while starting"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(20)
        self.sock.close()
