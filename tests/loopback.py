"""A threaded TCP server on a free loopback port, served on a daemon thread while a `with`
block runs: the base of the test proxies."""

import socketserver
import threading


class LoopbackServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler: type[socketserver.BaseRequestHandler]):
        super().__init__(("127.0.0.1", 0), handler)
        self.port = self.server_address[1]

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info):
        self.shutdown()
        self.server_close()
