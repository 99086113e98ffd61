"""A real S3-compatible server for the store's tests: moto's, on 127.0.0.1,
with IAM authentication on (every request's AWS Signature Version 4 is
checked as AWS checks it), a bucket "ckpts" and a user allowed everything
in S3 (AK, SK); and a proxy in front of it (PROXY) that refuses, stalls or
cuts the requests a Plan names. Importing it starts both; without
moto[server] it exits 77 (skipped), saying so.
"""
import http.client
import http.server
import logging
import os
import socket
import socketserver
import sys
import threading
import time

try:
    # Authentication after the first actions (the set-up's IAM calls): moto
    # reads it at import.
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "4"
    import boto3
    from moto.server import ThreadedMotoServer
except ImportError as e:
    print(f"SKIP: moto[server] is not installed ({e}); tools/setup.sh installs it")
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request otherwise
MOTO_PORT = free_port()
moto = ThreadedMotoServer(ip_address="127.0.0.1", port=MOTO_PORT, verbose=False)
moto.start()
MOTO = f"http://127.0.0.1:{MOTO_PORT}"

# The set-up, unauthenticated (INITIAL_NO_AUTH_ACTION_COUNT): a user who may
# do anything in S3, and its keys.
root = dict(endpoint_url=MOTO, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
iam = boto3.client("iam", **root)
iam.create_user(UserName="ctrial")
iam.put_user_policy(UserName="ctrial", PolicyName="s3", PolicyDocument='{"Version": "2012-10-17", "Statement": '
                    '[{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}')
key = iam.create_access_key(UserName="ctrial")["AccessKey"]
AK, SK = key["AccessKeyId"], key["SecretAccessKey"]
s3 = boto3.client("s3", endpoint_url=MOTO, region_name="us-east-1", aws_access_key_id=AK, aws_secret_access_key=SK)
BUCKET = "ckpts"
s3.create_bucket(Bucket=BUCKET)


# ---- the proxy: faults on chosen requests -------------------------------------------------

class Plan:
    """What the proxy does to requests that match: (method, substring of the
    path and query) -> mode ("status", "stall", "cut") with a count (None:
    always), after letting `skip` matching requests through, and a status or
    seconds. `hit` is set when a rule acts."""
    hit = threading.Event()
    lock = threading.Lock()
    rules = []
    seen = []

    @classmethod
    def set(cls, *rules):
        with cls.lock:
            cls.rules = [dict(r) for r in rules]
            cls.seen = []
            cls.hit.clear()

    @classmethod
    def take(cls, method, path):
        with cls.lock:
            cls.seen.append((method, path))
            for r in cls.rules:
                if r["method"] == method and r["match"] in path and (r.get("count") is None or r["count"] > 0):
                    if r.get("skip", 0) > 0:
                        r["skip"] -= 1
                        continue
                    if r.get("count") is not None:
                        r["count"] -= 1
                    cls.hit.set()
                    return r
        return None


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        rule = Plan.take(self.command, self.path)
        if rule and rule["mode"] == "status":
            msg = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                   b'<Message>Please reduce your request rate.</Message></Error>')
            self.send_response(rule["status"])
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        if rule and rule["mode"] == "stall":
            time.sleep(rule["seconds"])
        conn = http.client.HTTPConnection("127.0.0.1", MOTO_PORT, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
        conn.request(self.command, self.path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        if rule and rule["mode"] == "cut":
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


class ProxyServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client killed mid-request (kill -9 tests) is expected here


PROXY_PORT = free_port()
proxy = ProxyServer(("127.0.0.1", PROXY_PORT), Proxy)
threading.Thread(target=proxy.serve_forever, daemon=True).start()
PROXY = f"http://127.0.0.1:{PROXY_PORT}"




def stop():
    proxy.shutdown()
    moto.stop()
