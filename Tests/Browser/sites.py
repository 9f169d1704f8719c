"""Pages of other origins that try to act for the signed-in user: what a forger's site would serve."""

import html
import http.server
import json
import ssl
import threading
import urllib.parse


class ForgerySite:
    """One origin serving attack pages; every page reports its outcome in document.title ("done: ..." / "failed: ...").

    /post?target=URL&NAME=VALUE...     an auto-submitted form POST (a top-level navigation) with those fields;
                                       with set_cookie=TEXT, document.cookie = TEXT first (on the forger's host)
    /fetch?target=URL&method=M         fetch(URL, {method: M, credentials: "include"}), CORS mode
    /no-cors?target=URL                fetch(URL, {method: "POST", mode: "no-cors", credentials: "include"})
    """

    def __init__(self, host, port, certificate=None):
        self.origin = f"{'https' if certificate else 'http'}://{host}:{port}"
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        if certificate:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certificate[0], certificate[1])
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def url(self, page, **parameters):
        return f"{self.origin}/{page}?{urllib.parse.urlencode(parameters)}"

    @staticmethod
    def _handler():
        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *arguments):
                pass

            def do_GET(self):
                address = urllib.parse.urlparse(self.path)
                query = dict(urllib.parse.parse_qsl(address.query))
                target = query.pop("target", "")
                cookie = query.pop("set_cookie", None)
                if address.path == "/post":
                    fields = "".join(f'<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}">'
                                     for name, value in query.items())
                    script = (f"document.cookie = {json.dumps(cookie)};" if cookie else "") + "document.forms[0].submit();"
                    body = f'<form method="POST" action="{html.escape(target)}">{fields}</form>'
                elif address.path in ("/fetch", "/no-cors"):
                    options = ({"method": query.get("method", "POST"), "credentials": "include"} if address.path == "/fetch"
                               else {"method": "POST", "mode": "no-cors", "credentials": "include"})
                    script = (f"fetch({json.dumps(target)}, {json.dumps(options)})"
                              ".then(a => document.title = 'done: ' + a.type + ' ' + a.status,"
                              " e => document.title = 'failed: ' + e);")
                    body = ""
                else:
                    self.send_error(404)
                    return
                page = f"<!doctype html><title>forgery</title>{body}<script>{script}</script>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

        return Handler
