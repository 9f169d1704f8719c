"""A minimal FastCGI client over a unix socket, for bench/revocation: one kept connection, one request at a time,
the parameters nginx's stock fastcgi_params sends (the responder sees what it would behind nginx)."""
import os
import socket
import struct

BEGIN_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT = 1, 3, 4, 5, 6
RESPONDER, KEEP_CONN = 1, 1
# One request at a time on the connection, so every request can use the same id.
REQUEST_ID = 1


def record(kind, content=b""):
    """One record; content longer than a record holds is split by the caller (`stream`)."""
    padding = -len(content) % 8
    return struct.pack(">BBHHBx", 1, kind, REQUEST_ID, len(content), padding) + content + b"\0" * padding


def stream(kind, content):
    """A stream (PARAMS, STDIN): the content in records of at most 65535 bytes, then the empty record that ends it."""
    chunks = [record(kind, content[i:i + 65535]) for i in range(0, len(content), 65535)]
    return b"".join(chunks) + record(kind)


def pair(name, value):
    """A name-value pair of PARAMS: lengths in one byte below 128, else four with the high bit set."""
    def length(n):
        return struct.pack(">B", n) if n < 128 else struct.pack(">I", n | 0x80000000)
    name, value = name.encode(), value.encode()
    return length(len(name)) + length(len(value)) + name + value


def encode(method, path, headers=(), body=b"", query=""):
    """The bytes of one request: the same ones may be sent again (the poll loop formats its check once)."""
    params = {
        "QUERY_STRING": query, "REQUEST_METHOD": method, "CONTENT_TYPE": "", "CONTENT_LENGTH": str(len(body)) if body else "",
        "SCRIPT_NAME": path, "REQUEST_URI": path + ("?" + query if query else ""), "DOCUMENT_URI": path,
        "DOCUMENT_ROOT": "/var/www/html", "SERVER_PROTOCOL": "HTTP/1.1", "REQUEST_SCHEME": "https", "HTTPS": "on",
        "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_SOFTWARE": "nginx", "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "40000",
        "SERVER_ADDR": "127.0.0.1", "SERVER_PORT": "443", "SERVER_NAME": "127.0.0.1", "REDIRECT_STATUS": "200",
        "REQUEST_ID": os.urandom(16).hex(), "HTTP_HOST": "127.0.0.1",
    }
    for name, value in headers:
        if name.lower() == "content-type":
            params["CONTENT_TYPE"] = value
        else:
            params["HTTP_" + name.upper().replace("-", "_")] = value
    begin = record(BEGIN_REQUEST, struct.pack(">HB5x", RESPONDER, KEEP_CONN))
    return begin + stream(PARAMS, b"".join(pair(n, v) for n, v in params.items())) + stream(STDIN, body)


class Connection:
    """A kept connection to a responder's socket."""

    def __init__(self, path):
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.connect(path)
        self.buffer = bytearray()

    def close(self):
        self.socket.close()

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.socket.recv(65536)
            if not chunk:
                raise ConnectionError("the responder closed the connection")
            self.buffer += chunk
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def send(self, request):
        """Sends REQUEST (from `encode`) and reads the answer: (status, body)."""
        self.socket.sendall(request)
        out = bytearray()
        while True:
            _, kind, _, length, padding = struct.unpack(">BBHHBx", self._read(8))
            content = self._read(length + padding)[:length]
            if kind == STDOUT:
                out += content
            elif kind == END_REQUEST:
                break
        head, _, body = bytes(out).partition(b"\r\n\r\n")
        status = 200   # CGI: no Status header is 200
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"status:"):
                status = int(line.split()[1])
        return status, body
