"""src/store/s3.c against a real S3-compatible server: moto's, started here
on 127.0.0.1, with IAM authentication on, so every request's AWS Signature
Version 4 is checked as AWS checks it; faults come from a proxy in front of
it that refuses, stalls or cuts chosen requests.

    test_s3.py S3_TOOL

1. Objects: bytes and files up and down (keys with spaces, '+' and non-ASCII
   characters), sizes, a missing key (CT_ENOENT naming s3://bucket/key),
   delete; boto3 sees what ctrial wrote and ctrial reads what boto3 wrote.
2. Multipart: a 12 MiB file in 5 MiB parts is one object of the same bytes
   (ETag "-3"); listing pages: 1005 keys in 2 pages, in key order.
3. Credentials: a wrong secret is refused (403 SignatureDoesNotMatch, not
   retried); none at all is CT_EINVAL naming the variables.
4. Faults: 503 twice then success (3 requests); 503 always: fails after
   max_attempts, naming the attempts and SlowDown, nothing written; a part
   that keeps failing aborts the multipart upload (no upload left, no
   object); a stalled answer is a timeout; a cut download is tried again
   and the file is whole; a refused connection names the endpoint.
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report  # noqa: E402
from s3_server import AK, BUCKET, MOTO, PROXY, SK, Plan, free_port, s3, stop  # noqa: E402

TOOL = os.path.abspath(sys.argv[1])
T0 = time.time()
WORK = tempfile.mkdtemp(prefix="s3_")


def tool(endpoint, *args, env=None, secret=None, timeout=120):
    e = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=secret or SK, AWS_REGION="us-east-1")
    e.update(env or {})
    for k in [k for k, v in e.items() if v is None]:
        del e[k]
    t = time.time()
    p = subprocess.run([TOOL, endpoint, BUCKET, *args], capture_output=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace"), time.time() - t


def sha(b):
    return hashlib.sha256(b).hexdigest()


def objects(prefix=""):
    keys, token = [], None
    while True:
        kw = dict(Bucket=BUCKET, Prefix=prefix)
        if token:
            kw["ContinuationToken"] = token
        r = s3.list_objects_v2(**kw)
        keys += [(o["Key"], o["Size"]) for o in r.get("Contents", [])]
        if not r.get("IsTruncated"):
            return keys
        token = r["NextContinuationToken"]


# ---- 1: objects ----------------------------------------------------------------------------

for key in ("plain.txt", "a dir/with space+plus ß.txt"):
    code, out, err, _ = tool(MOTO, "put-bytes", key, "hello s3")
    check(code == 0, f"put-bytes {key!r} ({err.strip()})")
    got = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() if code == 0 else b""
    check(got == b"hello s3", f"boto3 reads {key!r} as written ({got!r})")
    code, out, err, _ = tool(MOTO, "get-bytes", key)
    check(code == 0 and out == b"hello s3", f"get-bytes {key!r} ({out!r}, {err.strip()})")

blob = os.urandom(300_000)
src = os.path.join(WORK, "blob.bin")
open(src, "wb").write(blob)
code, _, err, _ = tool(MOTO, "put-file", "run/ckpt-1/state_dict.pth", src)
check(code == 0, f"put-file 300 kB ({err.strip()})")
dst = os.path.join(WORK, "back.bin")
code, out, err, _ = tool(MOTO, "get-file", "run/ckpt-1/state_dict.pth", dst)
check(code == 0 and out.strip() == b"300000" and open(dst, "rb").read() == blob,
      f"get-file gives the same 300000 bytes ({out.strip()!r}, {err.strip()})")
s3.put_object(Bucket=BUCKET, Key="run/from-boto3", Body=b"written by boto3")
code, out, err, _ = tool(MOTO, "get-bytes", "run/from-boto3")
check(out == b"written by boto3", "ctrial reads what boto3 wrote")

missing = os.path.join(WORK, "missing.bin")
code, out, err, _ = tool(MOTO, "get-file", "run/nothing-here", missing)
check(code == 1 and "CT_ENOENT" in err and f"s3://{BUCKET}/run/nothing-here" in err and "NoSuchKey" in err
      and not os.path.exists(missing), f"a missing key: CT_ENOENT naming it, no file left ({err.strip()})")
code, _, err, _ = tool(MOTO, "delete", "run/from-boto3")
check(code == 0 and ("run/from-boto3", 16) not in objects("run/"), f"delete ({err.strip()})")
code, _, err, _ = tool(MOTO, "delete", "run/from-boto3")
check(code == 0, f"deleting what is not there is no error ({err.strip()})")

# ---- 2: multipart and pages ----------------------------------------------------------------

big = os.urandom(12 << 20)
bigf = os.path.join(WORK, "big.bin")
open(bigf, "wb").write(big)
code, _, err, took = tool(MOTO, "put-file", "run/big.bin", bigf, env={"S3_PART_BYTES": str(5 << 20)})
head = s3.head_object(Bucket=BUCKET, Key="run/big.bin") if code == 0 else {}
check(code == 0 and head.get("ContentLength") == len(big) and head.get("ETag", "").endswith('-3"'),
      f"a 12 MiB file in 5 MiB parts: one object of 3 parts ({head.get('ETag')}, {err.strip()})")
got = s3.get_object(Bucket=BUCKET, Key="run/big.bin")["Body"].read() if code == 0 else b""
check(sha(got) == sha(big), "its bytes are the file's")
code, out, err, _ = tool(MOTO, "get-file", "run/big.bin", dst)
check(code == 0 and sha(open(dst, "rb").read()) == sha(big), f"and come back whole ({err.strip()})")

for i in range(1005):
    s3.put_object(Bucket=BUCKET, Key=f"many/k{i:05d}", Body=b"x" * (i % 7))
Plan.set()
code, out, err, _ = tool(PROXY, "list", "many/")
lines = out.decode().split("\n")[:-1] if code == 0 else []
want = [f"many/k{i:05d} {i % 7}" for i in range(1005)]
lists = [p for m, p in Plan.seen if m == "GET"]
check(lines == want, f"list: 1005 keys with their sizes, in key order ({len(lines)}, {err.strip()})")
check(len(lists) == 2 and "continuation-token=" in lists[1], f"in 2 pages ({len(lists)})")

# ---- 3: credentials ------------------------------------------------------------------------

code, _, err, _ = tool(MOTO, "put-bytes", "run/x", "y", secret="wrong-secret")
check(code == 1 and "403" in err and "SignatureDoesNotMatch" in err and "attempts" not in err,
      f"a wrong secret: 403 SignatureDoesNotMatch, not retried ({err.strip()})")
code, _, err, _ = tool(MOTO, "put-bytes", "run/x", "y", env={"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None})
check(code == 1 and "CT_EINVAL" in err and "AWS_ACCESS_KEY_ID" in err, f"no credentials: named ({err.strip()})")

# ---- 4: faults -----------------------------------------------------------------------------

fast = {"S3_BACKOFF_S": "0.05"}
Plan.set(dict(method="PUT", match="/flaky", mode="status", status=503, count=2))
code, _, err, _ = tool(PROXY, "put-bytes", "flaky", "third time", env=fast)
puts = [p for m, p in Plan.seen if m == "PUT"]
check(code == 0 and len(puts) == 3, f"503 twice, then stored: 3 requests ({len(puts)}, {err.strip()})")
check(s3.get_object(Bucket=BUCKET, Key="flaky")["Body"].read() == b"third time", "the object is there")

Plan.set(dict(method="PUT", match="/down", mode="status", status=503))
code, _, err, _ = tool(PROXY, "put-bytes", "down", "never", env=dict(fast, S3_MAX_ATTEMPTS="3"))
check(code == 1 and "after 3 attempts" in err and "503 SlowDown" in err and ("down", 5) not in objects(""),
      f"503 always: fails after 3 attempts naming SlowDown, nothing stored ({err.strip()})")

Plan.set(dict(method="PUT", match="partNumber=2", mode="status", status=500))
code, _, err, _ = tool(PROXY, "put-file", "run/half.bin", bigf, env=dict(fast, S3_PART_BYTES=str(5 << 20),
                                                                          S3_MAX_ATTEMPTS="2"))
uploads = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
check(code == 1 and "upload part 2 of 3" in err and not uploads and "run/half.bin" not in dict(objects("run/")),
      f"a part that keeps failing: the upload is aborted, no object ({len(uploads)} uploads left, {err.strip()})")

Plan.set(dict(method="GET", match="/run/ckpt-1/state_dict.pth", mode="stall", seconds=4))
code, _, err, took = tool(PROXY, "get-bytes", "run/ckpt-1/state_dict.pth",
                          env=dict(fast, S3_STALL_S="1", S3_MAX_ATTEMPTS="2", S3_MAX_BYTES="1000000"))
check(code == 1 and "timeout" in err.lower() and took < 7,
      f"a server that stalls: a timeout after 2 attempts, in {took:.1f} s ({err.strip()})")

Plan.set(dict(method="GET", match="/run/big.bin", mode="cut", count=1))
code, out, err, _ = tool(PROXY, "get-file", "run/big.bin", dst, env=fast)
check(code == 0 and sha(open(dst, "rb").read()) == sha(big) and len(Plan.seen) == 2,
      f"a download cut half way: tried again, the file whole ({len(Plan.seen)} requests, {err.strip()})")

closed = f"http://127.0.0.1:{free_port()}"
code, _, err, took = tool(closed, "put-bytes", "x", "y", env=dict(fast, S3_MAX_ATTEMPTS="2"))
check(code == 1 and closed in err and "connect" in err.lower(),
      f"no server: the endpoint is named after 2 attempts ({err.strip()})")

stop()
exit_with_report(T0, WORK)
