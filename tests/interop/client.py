#!/usr/bin/env python3
"""An independent client of the cutpoint store, protocol v1, written from PROTOCOL.md alone.

Standard library only.  SHA-256 namespaces only (Python's stdlib has no BLAKE3).

    python3 tests/interop/client.py --selftest --bin native/target/release/cutpoint

(Written by an outside implementer who read native/store/PROTOCOL.md and no source: it checks
that the specification is enough to interoperate. tests/js/interop.test.ts runs it.)

starts `cutpoint serve` on 127.0.0.1:0 over a temp dir, runs every check, cross-checks with
the native CLI, prints one line per check and exits 0 only when all pass.
"""
import argparse
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

TIMEOUT = 20  # seconds, every socket operation

# ---------------------------------------------------------------- protocol constants
MAGIC = b"CPPACK\x00\x01"
ALG_SHA256 = 2
ALG_BLAKE3 = 1
MAX_CHUNK = 64 * 1024 * 1024
DIGEST_TAG = b"cutpoint file digest v1\x00"

# Our own chunker: fixed-size 16 KiB chunks (last one shorter). The profile is a label
# (PROTOCOL.md 3.5); we claim a gear profile with an unusual seed so that no cutpoint client
# takes our recipes as hints.  Written in the store's canonical form (3.5), so that comparing
# it with a stored recipe's profile line works: the server writes seed= as lower-case 0x-hex
# (seed=4242 is stored as seed=0x1092), which PROTOCOL.md does not say.
CHUNK_SIZE = 16 * 1024
PROFILE = "gear:16k:16k:16k:seed=0x1092"


def sha256(b):
    return hashlib.sha256(b).digest()


# ---------------------------------------------------------------- HTTP
class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def h(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:300])


class Store:
    def __init__(self, url, ns, token=None):
        u = urllib.parse.urlsplit(url)
        assert u.scheme == "http"
        self.host = u.hostname
        self.port = u.port or 80
        self.ns = ns
        self.token = token
        self.conn = None
        self.limits = None
        self.close_after_error = True

    # -- transport
    def _conn(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT)
        return self.conn

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def raw(self, method, path, body=None, headers=None, token=Ellipsis, retry_safe=False):
        """One request; returns Resp. Reads the answer even when the send failed (2.1)."""
        hdrs = dict(headers or {})
        tok = self.token if token is Ellipsis else token
        if tok is not None and "Authorization" not in hdrs:
            hdrs["Authorization"] = "Bearer " + tok
        if body is not None and "Content-Type" not in hdrs:
            hdrs["Content-Type"] = "application/octet-stream"
        attempts = 4 if retry_safe else 1
        delay = 0.2
        for attempt in range(attempts):
            conn = self._conn()
            send_failed = None
            try:
                conn.putrequest(method, path, skip_accept_encoding=True)
                if body is not None:
                    conn.putheader("Content-Length", str(len(body)))
                for k, v in hdrs.items():
                    conn.putheader(k, v)
                conn.endheaders()
                if body:
                    # send in pieces so a server that answers early is noticed
                    mv = memoryview(body)
                    for i in range(0, len(body), 1 << 16):
                        conn.send(mv[i:i + (1 << 16)])
            except (BrokenPipeError, ConnectionResetError) as e:
                send_failed = e
            try:
                r = conn.getresponse()
                data = r.read() if method != "HEAD" else b""
                # a short body is an error (4.6)
                cl = r.getheader("Content-Length")
                if method != "HEAD" and cl is not None and r.status != 304 and len(data) != int(cl):
                    raise IOError("short body: %d of %s bytes" % (len(data), cl))
                resp = Resp(r.status, r.getheaders(), data)
                # The server may answer an error before reading the body and then close the
                # connection (2.1) without saying `Connection: close`: never reuse it then.
                if r.will_close or (self.close_after_error and body and r.status >= 400):
                    self.close()
            except (http.client.HTTPException, OSError) as e:
                self.close()
                if attempt + 1 < attempts:
                    time.sleep(delay)
                    delay *= 2
                    continue
                raise IOError("no answer (%s; send: %s)" % (e, send_failed))
            if retry_safe and attempt + 1 < attempts and (
                    resp.status == 503 or (resp.status == 500 and _code(resp) == "internal")):
                time.sleep(delay)
                delay *= 2
                continue
            return resp
        return resp

    def nspath(self, rest=""):
        return "/v1/ns/%s%s" % (self.ns, rest)

    @staticmethod
    def qname(name):
        # one path segment, every byte but unreserved percent-encoded (2.3)
        return urllib.parse.quote(name, safe="-._~")

    # -- requests
    def info(self):
        r = self.raw("GET", "/v1", token=None, retry_safe=True)
        if r.status == 200:
            self.limits = r.json()["limits"]
        return r

    def query(self, ids):
        return self.raw("POST", self.nspath("/query"), b"".join(ids), retry_safe=True)

    def missing(self, ids):
        """Ids the namespace lacks, in batches of max_query_ids."""
        maxq = (self.limits or {}).get("max_query_ids", 16384)
        out = []
        for i in range(0, len(ids), maxq):
            r = self.query(ids[i:i + maxq])
            if r.status != 200 or len(r.body) % 32:
                raise IOError("query: %r" % r)
            out += [r.body[j:j + 32] for j in range(0, len(r.body), 32)]
        return out

    def upload(self, pack):
        return self.raw("POST", self.nspath("/packs"), pack, retry_safe=True)

    def upload_chunks(self, chunks, layout=0, target=512 * 1024, max_chunk=CHUNK_SIZE):
        """chunks: list of (id, bytes). Splits into packs within max_pack_bytes (4.1)."""
        maxp = (self.limits or {}).get("max_pack_bytes", 256 << 20)
        if maxp < 16 + 72 + max_chunk:
            raise IOError("store's max_pack_bytes too small for our chunks")
        target = min(target, maxp - max_chunk - 72)
        results = []
        cur, size = [], 16 + 36
        for cid, data in chunks:
            cur.append((cid, data))
            size += 36 + len(data)
            if size >= target:
                results.append(self._send_pack(cur, layout))
                cur, size = [], 16 + 36
        if cur:
            results.append(self._send_pack(cur, layout))
        return results

    def _send_pack(self, chunks, layout):
        r = self.upload(build_pack(chunks, layout=layout))
        if r.status != 200:
            raise IOError("upload: %r" % r)
        return r.json()

    def commit(self, name, body):
        return self.raw("PUT", self.nspath("/files/" + self.qname(name)), body,
                        headers={"Content-Type": "text/plain; charset=utf-8"})

    def recipe(self, name, version=None):
        q = "" if version is None else "?version=%d" % version
        return self.raw("GET", self.nspath("/recipes/" + self.qname(name) + q), retry_safe=True)

    def restore(self, name, version=None, headers=None, method="GET"):
        q = "" if version is None else "?version=%d" % version
        return self.raw(method, self.nspath("/files/" + self.qname(name) + q),
                        headers=headers, retry_safe=True)

    def list(self):
        return self.raw("GET", self.nspath("/files"), retry_safe=True)

    def delete(self, name, version=None):
        q = "" if version is None else "?version=%d" % version
        return self.raw("DELETE", self.nspath("/files/" + self.qname(name) + q))

    def gc(self, grace=None):
        q = "" if grace is None else "?grace=%s" % grace
        return self.raw("POST", self.nspath("/gc" + q), b"")

    def check(self):
        return self.raw("GET", self.nspath("/check"), retry_safe=True)

    # -- a whole push (5.1) and pull
    def push(self, name, data, use_delta=True, layout=0):
        """Returns (commit Resp, recipe entries, was_delta)."""
        if self.limits is None:
            self.info()
        entries = chunk_file(data)
        base = None
        known = set()
        if use_delta:
            r = self.recipe(name)
            if r.status == 200:
                try:
                    base = parse_recipe(r.body.decode("utf-8"))
                    base["version"] = int(r.h("X-Cutpoint-Version"))
                except ValueError:
                    base = None
            if base is not None:
                known = {e[0] for e in base["entries"]}
            if base is not None and (base["profile"] != PROFILE or base["hash"] != "sha256"):
                base = None
        ids = []
        seen = set()
        for e in entries:
            if e[0] not in known and e[0] not in seen:
                seen.add(e[0])
                ids.append(e[0])
        miss = set(self.missing(ids))
        bydata = {}
        pos = 0
        for cid, size, _l, _c in entries:
            if cid in miss and cid not in bydata:
                bydata[cid] = data[pos:pos + size]
            pos += size
        self.upload_chunks([(c, bydata[c]) for c in ids if c in bydata], layout=layout)
        body = None
        was_delta = False
        if base is not None:
            body = render_delta(base["version"], base["entries"], entries)
            was_delta = True
        if body is None:
            body = render_recipe(entries)
        started_from = base["version"] if base is not None else 0
        want_digest = file_digest(entries).hex()
        for _round in range(4):
            try:
                r = self.commit(name, body)
                lost = r.status >= 500 and _code(r) != "damaged"
            except IOError:
                r, lost = None, True
            if lost:
                # 5.2: a commit is not idempotent; find out whether it was stored
                time.sleep(0.5)
                g = self.recipe(name)
                if g.status == 200:
                    v = int(g.h("X-Cutpoint-Version"))
                    rec = parse_recipe(g.body.decode("utf-8"))
                    if v > started_from and rec["digest"] == want_digest:
                        return Resp(201, [], json.dumps({
                            "name": name, "version": v, "bytes": sum(e[1] for e in entries),
                            "chunks": len(entries), "digest": want_digest,
                            "recovered": True}).encode()), entries, was_delta
                continue
            if r.status == 404 and was_delta:
                body, was_delta = render_recipe(entries), False
                continue
            if r.status == 409 and _code(r) == "missing_chunks":
                want = {bytes.fromhex(h) for h in r.json()["missing"]}
                pos, send = 0, {}
                for cid, size, _l, _c in entries:
                    if cid in want:
                        send[cid] = data[pos:pos + size]
                    pos += size
                self.upload_chunks(list(send.items()), layout=layout)
                continue
            return r, entries, was_delta
        return r, entries, was_delta

    def pull(self, name, version=None):
        """Restore via recipe + files, verifying each chunk against the recipe. Returns bytes."""
        r = self.recipe(name, version)
        if r.status != 200:
            raise IOError("recipe: %r" % r)
        rec = parse_recipe(r.body.decode("utf-8"))
        if rec["hash"] != "sha256":
            raise IOError("namespace hash %s: this client only verifies sha256" % rec["hash"])
        v = int(r.h("X-Cutpoint-Version"))
        f = self.restore(name, v)
        if f.status != 200:
            raise IOError("restore: %r" % f)
        if f.h("ETag") != '"%s"' % rec["digest"]:
            raise IOError("ETag %s is not the recipe's digest %s" % (f.h("ETag"), rec["digest"]))
        data = f.body
        pos = 0
        for cid, size, _l, _c in rec["entries"]:
            if sha256(data[pos:pos + size]) != cid:
                raise IOError("chunk at %d does not match its id" % pos)
            pos += size
        if pos != len(data):
            raise IOError("restored %d bytes, recipe says %d" % (len(data), pos))
        if file_digest(rec["entries"]).hex() != rec["digest"]:
            raise IOError("recipe digest does not match its chunk list")
        return data


def wrong_len_and_missing(ents, missing_id):
    return [(ents[0][0], ents[0][1] - 1, "-", "r"), (missing_id, 14, "-", "r")]


def _err(r):
    try:
        return r.json().get("error")
    except Exception:
        return r.body[:200]


def _code(r):
    try:
        return r.json().get("code")
    except Exception:
        return None


# ---------------------------------------------------------------- bodies
def build_pack(chunks, layout=0, alg=ALG_SHA256, count=None):
    """chunks: list of (id32, data). layout 0 framed, 1 heads first (3.1)."""
    header = MAGIC + bytes([alg, layout]) + bytes(6)
    n = len(chunks) if count is None else count
    end = struct.pack("<IQ", 0, n) + bytes(24)
    if layout == 0:
        parts = [header]
        for cid, data in chunks:
            parts.append(struct.pack("<I", len(data)) + cid)
            parts.append(data)
        parts.append(end)
    else:
        parts = [header]
        parts += [struct.pack("<I", len(d)) + c for c, d in chunks]
        parts.append(end)
        parts += [d for _c, d in chunks]
    return b"".join(parts)


def chunk_file(data):
    """Fixed-size chunker. Entries: (id, size, last, cut) with last='-' and cut='r' (3.3)."""
    out = []
    for i in range(0, len(data), CHUNK_SIZE):
        c = data[i:i + CHUNK_SIZE]
        out.append((sha256(c), len(c), "-", "r"))
    return out


def file_digest(entries):
    h = hashlib.sha256(DIGEST_TAG)
    for cid, size, _l, _c in entries:
        h.update(cid + struct.pack("<I", size))
    return h.digest()


def chunk_line(e):
    return "%s %d %s %s\n" % (e[0].hex(), e[1], e[2], e[3])


def render_recipe(entries, profile=PROFILE, hashname="sha256", digest=Ellipsis, end=None, nl="\n"):
    d = file_digest(entries).hex() if digest is Ellipsis else digest
    s = "cutpoint-recipe 1\nprofile %s\nhash %s\n" % (profile, hashname)
    if d is not None:
        s += "digest %s\n" % d
    s += "".join(chunk_line(e) for e in entries)
    if end is None:
        end = (len(entries), sum(e[1] for e in entries))
    s += "end %d %d\n" % end
    return s.replace("\n", nl).encode("utf-8")


def delta_ops(base, new):
    """Greedy: runs of base entries where the new entry equals base's at the matching index
    (or anywhere, via an index of base), else chunk lines."""
    where = {}
    for i, e in enumerate(base):
        where.setdefault(e, i)
    ops = []
    i = 0
    while i < len(new):
        e = new[i]
        if e in where:
            s = where[e]
            n = 1
            while i + n < len(new) and s + n < len(base) and base[s + n] == new[i + n]:
                n += 1
            ops.append(("=", s, n))
            i += n
        else:
            ops.append(("c", e))
            i += 1
    return ops


def render_delta(base_version, base_entries, entries, ops=None, profile=PROFILE, end=None):
    if ops is None:
        ops = delta_ops(base_entries, entries)
    s = "cutpoint-delta 1\nbase %d\nprofile %s\nhash sha256\ndigest %s\n" % (
        base_version, profile, file_digest(entries).hex())
    for op in ops:
        s += "= %d %d\n" % (op[1], op[2]) if op[0] == "=" else chunk_line(op[1])
    if end is None:
        end = (len(entries), sum(e[1] for e in entries))
    s += "end %d %d\n" % end
    return s.encode("utf-8")


HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


def parse_recipe(text):
    lines = text.split("\n")
    if lines[-1] != "":
        raise ValueError("recipe does not end with LF")
    lines = lines[:-1]
    if not lines or lines[0] != "cutpoint-recipe 1":
        raise ValueError("bad first line")
    rec = {"entries": [], "digest": None}
    i = 1
    if not lines[i].startswith("profile "):
        raise ValueError("no profile")
    rec["profile"] = lines[i][8:]
    i += 1
    if not lines[i].startswith("hash "):
        raise ValueError("no hash")
    rec["hash"] = lines[i][5:]
    i += 1
    if lines[i].startswith("digest "):
        rec["digest"] = lines[i][7:]
        i += 1
    while not lines[i].startswith("end "):
        f = lines[i].split(" ")
        if len(f) != 4 or not HEX64.match(f[0]):
            raise ValueError("bad chunk line %d" % (i + 1))
        rec["entries"].append((bytes.fromhex(f[0]), int(f[1]), f[2], f[3]))
        i += 1
    _e, count, nbytes = lines[i].split(" ")
    if i != len(lines) - 1:
        raise ValueError("lines after end")
    if int(count) != len(rec["entries"]) or int(nbytes) != sum(e[1] for e in rec["entries"]):
        raise ValueError("end does not match")
    return rec


# ---------------------------------------------------------------- self test
class Checks:
    def __init__(self):
        self.results = []
        self.notes = []

    def ok(self, name, cond, detail=""):
        self.results.append((name, bool(cond)))
        print("%s  %s%s" % ("PASS" if cond else "FAIL", name,
                             "" if cond or not detail else "  -- " + str(detail)[:400]),
              flush=True)
        return bool(cond)

    def note(self, text):
        self.notes.append(text)
        print("NOTE  " + text, flush=True)

    def run(self, name, fn):
        try:
            fn()
        except Exception as e:  # a check that crashed is a failed check
            import traceback
            traceback.print_exc()
            self.ok(name, False, "exception: %r" % e)


def is_err(r, status, code):
    if r.status != status:
        return False
    try:
        j = r.json()
    except Exception:
        return False
    return j.get("code") == code and isinstance(j.get("error"), str)


class Server:
    def __init__(self, binary, datadir, extra=()):
        self.proc = subprocess.Popen(
            [binary, "serve", "--data", datadir, "--listen", "127.0.0.1:0"] + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        line = b""
        deadline = time.time() + 20
        import select
        while time.time() < deadline:
            rd, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if rd:
                line = self.proc.stdout.readline()
                break
        m = re.search(rb"listening on (http://127\.0\.0\.1:\d+)", line)
        if not m:
            self.stop()
            raise RuntimeError("server did not start: %r" % line)
        self.url = m.group(1).decode()
        # drain its output so it never blocks on a full pipe
        import threading
        self.log = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def cli(binary, *args, timeout=60):
    return subprocess.run([binary] + list(args), capture_output=True, timeout=timeout)


def selftest(binary):
    C = Checks()
    tmp = tempfile.mkdtemp(prefix="cutpoint-interop-")
    servers = []
    try:
        srv = Server(binary, os.path.join(tmp, "data"), ["--max-pack", "1m", "--cors-origin", "http://example.test"])
        servers.append(srv)
        print("server: " + srv.url, flush=True)
        _selftest_open(C, binary, srv, tmp)
        _selftest_misc(C, srv)
        srv2 = Server(binary, os.path.join(tmp, "data2"),
                      (["--tokens", os.path.join(tmp, "tokens")] if _make_tokens(binary, tmp) else [])
                      + ["--header-timeout", "2", "--body-timeout", "2", "--max-recipe", "8k"])
        servers.append(srv2)
        _selftest_auth(C, srv2, tmp)
        _selftest_timeouts(C, srv2, tmp)
    except Exception as e:
        import traceback
        traceback.print_exc()
        C.ok("selftest ran to the end", False, repr(e))
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    n_fail = sum(1 for _n, ok in C.results if not ok)
    print("%d checks, %d passed, %d failed" % (len(C.results), len(C.results) - n_fail, n_fail))
    return 0 if n_fail == 0 and C.results else 1


def _make_tokens(binary, tmp):
    tf = os.path.join(tmp, "tokens")
    toks = {}
    for key, args in (("rw", ["--ns", "authns"]), ("r", ["--ns", "authns", "--read-only"]),
                      ("other", ["--ns", "otherns"])):
        p = cli(binary, "token", *args, "--tokens", tf)
        if p.returncode != 0:
            return False
        toks[key] = p.stdout.decode().strip().splitlines()[0].strip()
    with open(os.path.join(tmp, "tokens.json"), "w") as f:
        json.dump(toks, f)
    return True


def _selftest_misc(C, srv):
    import socket
    # namespace algorithm: a pack with no chunk fixes nothing; the first commit fixes it
    s = Store(srv.url, "algo-a")
    s.info()
    r = s.upload(build_pack([], alg=ALG_BLAKE3))
    C.ok("empty blake3 pack into a fresh namespace -> 200 (fixes nothing)", r.status == 200, r)
    data = os.urandom(20000)
    ents = chunk_file(data)
    r = s.upload(build_pack([(ents[0][0], data[:CHUNK_SIZE])]))
    C.ok("then a sha256 pack -> 200 (the empty blake3 pack fixed nothing)", r.status == 200, r)
    r = s.upload(build_pack([], alg=ALG_BLAKE3))
    C.note("empty blake3 pack into a sha256 namespace -> %d %s (3.1 lists 'an algorithm other "
           "than the namespace's' as a defect; 2.4 says a pack with no chunk fixes nothing)"
           % (r.status, _err(r) if r.status != 200 else r.body.decode()))
    s = Store(srv.url, "algo-b")
    s.info()
    r = s.commit("e", render_recipe([]))
    C.ok("first commit (an empty sha256 file) into a fresh namespace -> 201", r.status == 201, r)
    r = s.upload(build_pack([(b"\x11" * 32, b"x")], alg=ALG_BLAKE3))
    C.ok("then a blake3 pack -> 400 (the empty commit fixed sha256)",
         is_err(r, 400, "bad_request"), r)
    # chunked transfer encoding for a pack (4.3)
    s = Store(srv.url, "chunked")
    s.info()
    pack = build_pack([(ents[0][0], data[:CHUNK_SIZE]), (ents[1][0], data[CHUNK_SIZE:])], layout=1)
    conn = http.client.HTTPConnection(s.host, s.port, timeout=TIMEOUT)
    conn.request("POST", s.nspath("/packs"), body=iter([pack[:100], pack[100:20000], pack[20000:]]),
                 headers={"Content-Type": "application/octet-stream"}, encode_chunked=True)
    rr = conn.getresponse()
    body = rr.read()
    conn.close()
    C.ok("pack sent with Transfer-Encoding: chunked -> 200 stored=2",
         rr.status == 200 and json.loads(body).get("stored") == 2, (rr.status, body))
    # gc grace bounds
    r = s.gc(str(2 ** 64 - 1))
    C.ok("gc ?grace=2^64-1 -> 200, every pack spared",
         r.status == 200 and r.json().get("chunks_removed") == 0, r)
    r = s.gc(str(2 ** 64))
    C.ok("gc ?grace=2^64 -> 400", is_err(r, 400, "bad_request"), r)
    r = s.gc("-1")
    C.ok("gc ?grace=-1 -> 400", is_err(r, 400, "bad_request"), r)
    # odd corners, recorded
    r = s.recipe("nothing", 0)
    C.note("GET recipe ?version=0 -> %d %s" % (r.status, _code(r)))
    r = s.delete("nothing")
    C.ok("DELETE of a name that never existed -> 404", is_err(r, 404, "not_found"), r)
    r = s.raw("GET", s.nspath("/recipes/dir/x"))
    C.note("name with an unencoded '/' in the URL (two path segments) -> %d %s" % (r.status, _code(r)))
    r = s.raw("GET", s.nspath("/files"), headers={"Origin": "http://example.test"})
    C.ok("CORS: a request with Origin gets Access-Control-Allow-Origin",
         r.status == 200 and r.h("Access-Control-Allow-Origin") in ("*", "http://example.test"),
         r.headers)
    r = s.raw("GET", s.nspath("/files"), headers={"Origin": "http://other.test"})
    C.ok("CORS: an open store refuses an origin not given with --cors-origin: 403, no CORS answer",
         is_err(r, 403, "forbidden") and r.h("Access-Control-Allow-Origin") is None, r)
    r = s.raw("OPTIONS", s.nspath("/files/x"), headers={
        "Origin": "http://example.test", "Access-Control-Request-Method": "PUT",
        "Access-Control-Request-Headers": "authorization,content-type,if-none-match"})
    C.ok("CORS preflight OPTIONS -> 2xx allowing PUT and the request headers",
         200 <= r.status < 300 and "PUT" in (r.h("Access-Control-Allow-Methods") or "").upper()
         and "authorization" in (r.h("Access-Control-Allow-Headers") or "").lower(),
         (r.status, r.headers))
    C.note("CORS preflight answer: %d %s" % (r.status, {k: v for k, v in r.headers.items()
                                                      if k.startswith("access-control")}))
    r = s.raw("GET", "/v1/ns/chunked/files/", headers={})
    C.note("GET /v1/ns/NS/files/ (empty name) -> %d %s" % (r.status, _code(r)))
    s.close()

    # listing order, name lengths, LAST/CUT kept, delta corner cases
    s = Store(srv.url, "misc2")
    s.info()
    data = os.urandom(3 * CHUNK_SIZE)
    ents = chunk_file(data)
    s.upload_chunks([(e[0], data[i * CHUNK_SIZE:(i + 1) * CHUNK_SIZE]) for i, e in enumerate(ents)])
    names = ["b", "B", "a/b", "a b", "\u00e9", "Z", "a", "x" * 255]
    for nm in names:
        r = s.commit(nm, render_recipe(ents[:1]))
        if r.status != 201:
            C.ok("commit %r" % nm[:10], False, r)
    got = [f["name"] for f in s.list().json()["files"]]
    C.ok("list sorted by name bytewise (255-byte name included)",
         got == sorted(names, key=lambda n: n.encode()), got)
    r = s.restore("x" * 255)
    C.ok("a 255-byte name restores", r.status == 200 and r.body == data[:CHUNK_SIZE], r.status)
    r = s.restore("\u00e9")
    C.ok("Content-Disposition of a non-ASCII name: filename*=UTF-8''%C3%A9",
         r.h("Content-Disposition") == "attachment; filename*=UTF-8''%C3%A9", r.h("Content-Disposition"))
    marked = [(ents[0][0], ents[0][1], "ab", "h"), (ents[1][0], ents[1][1], "0f", "r"), ents[2]]
    r = s.commit("marks", render_recipe(marked))
    rr = parse_recipe(s.recipe("marks").body.decode()) if r.status == 201 else {"entries": []}
    C.ok("LAST and CUT hints kept as sent (ab h, 0f r, - r)",
         [(e[2], e[3]) for e in rr["entries"]] == [("ab", "h"), ("0f", "r"), ("-", "r")], r)
    r = s.commit("marks", render_delta(1, marked, [marked[2], marked[0]], ops=[("=", 2, 1), ("=", 0, 1)]))
    rr = parse_recipe(s.recipe("marks").body.decode()) if r.status == 201 else {"entries": []}
    C.ok("a delta run copies LAST and CUT", [(e[2], e[3]) for e in rr["entries"]] ==
         [("-", "r"), ("ab", "h")], r)
    up = [(ents[0][0], ents[0][1], "AB", "r")]
    r = s.commit("marksup", render_recipe(up))
    rr = s.recipe("marksup")
    C.note("LAST written upper-case 'AB' -> %d, stored as %r" % (
        r.status, parse_recipe(rr.body.decode())["entries"][0][2] if rr.status == 200 else _err(r)))
    r = s.commit("marks", render_delta(0, marked, marked[:1], ops=[("=", 0, 1)]))
    C.ok("delta with base 0 -> 400 (VERSION >= 1)", is_err(r, 400, "bad_request"), r)
    r = s.commit("marks", render_delta(1, marked, marked[:1], ops=[("=", 0, 0)], end=(0, 0)))
    C.ok("delta run with N = 0 -> 400 (N >= 1)", is_err(r, 400, "bad_request"), r)
    nid = sha256(b"absent chunk")
    r = s.commit("marks", render_delta(1, marked, marked[:1] + [(nid, 12, "-", "r")],
                                       ops=[("=", 0, 1), ("c", (nid, 12, "-", "r"))]))
    C.ok("delta naming a missing chunk -> 409 missing=[id]",
         is_err(r, 409, "missing_chunks") and r.json().get("missing") == [nid.hex()], r)
    r = s.restore("marks", headers={"If-None-Match": s.restore("marks").h("ETag")})
    C.note("304 answer headers: ETag=%r X-Cutpoint-Version=%r" % (r.h("ETag"), r.h("X-Cutpoint-Version")))
    r = s.restore("marks", headers={"Range": "bytes=0-0"})
    C.note("206 answer headers: ETag=%r X-Cutpoint-Version=%r" % (r.h("ETag"), r.h("X-Cutpoint-Version")))
    r = s.raw("GET", s.nspath("/recipes/a%2fb"))
    C.ok("lower-case percent escape (a%2fb) names 'a/b'", r.status == 200, r)
    s.close()


def _selftest_timeouts(C, srv, tmp):
    import socket
    toks = json.load(open(os.path.join(tmp, "tokens.json")))
    host, port = urllib.parse.urlsplit(srv.url).hostname, urllib.parse.urlsplit(srv.url).port
    # a body that stalls past --body-timeout (2 s): 400, nothing stored
    data = os.urandom(5000)
    cid = sha256(data)
    pack = build_pack([(cid, data)])
    sock = socket.create_connection((host, port), timeout=10)
    head = ("POST /v1/ns/authns/packs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
            "Content-Length: %d\r\n\r\n" % (toks["rw"], len(pack))).encode()
    sock.sendall(head + pack[:1000])
    t0 = time.time()
    got = b""
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                break
            got += b
            if b"\r\n\r\n" in got and b"}" in got:
                break
    except socket.timeout:
        pass
    sock.close()
    st = got.split(b" ", 2)[1] if got.startswith(b"HTTP/1.1 ") else b"?"
    C.ok("a body stalled past --body-timeout 2 -> 400 after ~2 s (took %.1f s)" % (time.time() - t0),
         st == b"400" and 1.0 < time.time() - t0 < 8, got[:300])
    s = Store(srv.url, "authns", toks["rw"])
    r = s.query([cid])
    C.ok("the stalled pack stored nothing", r.status == 200 and r.body == cid, r)
    s.close()
    # a head that stalls past --header-timeout (2 s): connection closed (maybe after a 408)
    sock = socket.create_connection((host, port), timeout=10)
    sock.sendall(b"GET /v1 HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    t0 = time.time()
    got = b""
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                break
            got += b
    except socket.timeout:
        got += b"<timeout>"
    sock.close()
    C.ok("a head stalled past --header-timeout 2 -> connection closed (took %.1f s; %r)"
         % (time.time() - t0, got[:40]),
         not got.endswith(b"<timeout>") and (got == b"" or got.startswith(b"HTTP/1.1 408"))
         and time.time() - t0 < 8, got[:200])


def _selftest_auth(C, srv, tmp):
    toks = json.load(open(os.path.join(tmp, "tokens.json")))
    s = Store(srv.url, "authns")
    r = s.info()
    C.ok("auth: GET /v1 without token is 200 and says auth=tokens",
         r.status == 200 and r.json().get("auth") == "tokens", r)
    r = s.raw("GET", s.nspath("/files"), token=None)
    C.ok("auth: no header -> 401 unauthorized", is_err(r, 401, "unauthorized"), r)
    r = s.raw("GET", s.nspath("/files"), headers={"Authorization": "Basic " + toks["rw"]})
    C.ok("auth: another scheme -> 401", is_err(r, 401, "unauthorized"), r)
    r = s.raw("GET", s.nspath("/files"), token="cpt_nope")
    C.ok("auth: unknown token -> 401", is_err(r, 401, "unauthorized"), r)
    r = s.raw("GET", s.nspath("/files"), headers={"Authorization": "bEaReR   %s " % toks["rw"]})
    C.ok("auth: scheme case-insensitive, extra spaces -> 200", r.status == 200, r)
    r = s.raw("GET", s.nspath("/files"), token=toks["other"])
    C.ok("auth: another namespace's token -> 403 forbidden", is_err(r, 403, "forbidden"), r)
    r = s.raw("GET", s.nspath("/files"), token=toks["r"])
    C.ok("auth: r token may list", r.status == 200, r)
    data = os.urandom(40000)
    ents = chunk_file(data)
    r = s.raw("POST", s.nspath("/packs"), build_pack([(ents[0][0], data[:CHUNK_SIZE])]),
              token=toks["r"])
    C.ok("auth: r token upload -> 403", is_err(r, 403, "forbidden"), r)
    r = s.raw("POST", s.nspath("/query"), ents[0][0], token=toks["r"])
    C.ok("auth: r token may query", r.status == 200 and r.body == ents[0][0], r)
    s.token = toks["rw"]
    r, _e, _d = s.push("a", data)
    C.ok("auth: rw token push", r.status == 201, r)
    s.token = toks["r"]
    r = s.delete("a")
    C.ok("auth: r token delete -> 403", is_err(r, 403, "forbidden"), r)
    r = s.gc(0)
    C.ok("auth: r token gc -> 403", is_err(r, 403, "forbidden"), r)
    # what a naive keep-alive client meets after an early error answer (2.1)
    s.close_after_error = False
    pk = build_pack([(ents[0][0], data[:CHUNK_SIZE])])
    broken = closes = 0
    for _i in range(20):
        r = s.raw("POST", s.nspath("/packs"), pk, token=toks["r"])
        if r.h("Connection") == "close":
            closes += 1
        try:
            s.raw("POST", s.nspath("/query"), ents[0][0], token=toks["r"])
        except IOError:
            broken += 1
    s.close_after_error = True
    s.close()
    # at most 65,536 heads in a heads-first pack; framed packs have no such limit written
    s.token = toks["rw"]
    one = b"\x01"
    oid = sha256(one)
    for layout in (1, 0):
        for n in (65536, 65537):
            r = s.upload(build_pack([(oid, one)] * n, layout=layout))
            if layout == 1:
                C.ok("heads-first pack with %d heads -> %s" % (n, "200" if n == 65536 else "400"),
                     (r.status == 200) if n == 65536 else is_err(r, 400, "bad_request"), r)
            else:
                C.note("framed pack with %d frames -> %d %s" % (n, r.status, _err(r) if r.status != 200 else ""))
    r = s.commit("big", ("cutpoint-recipe 1\nprofile %s\nhash sha256\n" % PROFILE).encode()
                 + b"x" * 9000 + b"\n")
    C.ok("commit body over --max-recipe 8k -> 413 too_large", is_err(r, 413, "too_large"), r)
    s.close()
    C.note("early 403 to a 16 KiB pack on a keep-alive connection, 20 tries: the next request "
           "on that connection failed (closed, no answer) %d times; 'Connection: close' was sent "
           "%d times" % (broken, closes))
    C.ok("auth: r token restore", s.pull("a") == data)
    s.close()


def _selftest_open(C, binary, srv, tmp):
    NS = "interop-sha"
    s = Store(srv.url, NS)

    # 1. GET /v1
    r = s.info()
    j = r.json() if r.status == 200 else {}
    lim = j.get("limits", {})
    C.ok("GET /v1: 200, service=cutpoint, protocol=1, auth=open, four limits",
         r.status == 200 and j.get("service") == "cutpoint" and j.get("protocol") == 1
         and j.get("auth") == "open"
         and all(isinstance(lim.get(k), int) for k in
                 ("max_pack_bytes", "max_recipe_bytes", "max_query_ids", "max_chunk_bytes")), r)
    C.ok("GET /v1: max_pack_bytes reflects --max-pack 1m", lim.get("max_pack_bytes") == 1 << 20, lim)

    # 2. chunk a file (3 MiB, with a repeated region so the file has duplicate chunks)
    rnd = random.Random(1234)
    block = rnd.randbytes(CHUNK_SIZE)
    data1 = rnd.randbytes(1 << 20) + block * 3 + rnd.randbytes(2 * (1 << 20) - 3 * CHUNK_SIZE + 1234)
    ents1 = chunk_file(data1)
    ids1 = [e[0] for e in ents1]
    uniq1 = list(dict.fromkeys(ids1))
    C.ok("chunker: %d chunks, %d distinct, sizes sum to file" % (len(ents1), len(uniq1)),
         sum(e[1] for e in ents1) == len(data1) and len(uniq1) == len(ents1) - 2)

    # 3a. query
    r = s.query(ids1)
    C.ok("query: every id of a new namespace is missing, in request order, each once",
         r.status == 200 and r.body == b"".join(uniq1), r)
    r = s.query([])
    C.ok("query: empty body -> 200 empty", r.status == 200 and r.body == b"", r)

    # 3b. upload: first half framed, second half heads-first; one duplicate inside a pack
    pos = {}
    off = 0
    for e in ents1:
        pos.setdefault(e[0], (off, e[1]))
        off += e[1]
    def cdata(cid):
        o, n = pos[cid]
        return data1[o:o + n]
    half = len(uniq1) // 2
    first = [(c, cdata(c)) for c in uniq1[:half]]
    second = [(c, cdata(c)) for c in uniq1[half:]]
    r = s.upload(build_pack(first[:3] + first[:1], layout=0))
    j = r.json() if r.status == 200 else {}
    C.ok("upload framed pack (3 chunks + 1 repeat): 200 chunks=4 stored=3 duplicates=1",
         r.status == 200 and j.get("chunks") == 4 and j.get("stored") == 3
         and j.get("duplicates") == 1 and j.get("stored_bytes") == 3 * CHUNK_SIZE
         and isinstance(j.get("pack"), str), r)
    res = s.upload_chunks(first[3:], layout=0)
    C.ok("upload framed packs within max_pack_bytes (%d packs)" % len(res),
         sum(x["stored"] for x in res) == len(first) - 3 and len(res) > 1, res)
    res = s.upload_chunks(second, layout=1)
    C.ok("upload heads-first packs (%d packs)" % len(res),
         sum(x["stored"] for x in res) == len(second)
         and sum(x["stored_bytes"] for x in res) == sum(len(d) for _c, d in second), res)
    r = s.query(ids1)
    C.ok("query after upload: nothing missing", r.status == 200 and r.body == b"", r)
    r = s.upload(build_pack(second[:5], layout=1))
    j = r.json() if r.status == 200 else {}
    C.ok("re-upload of present chunks: stored=0 duplicates=5 pack=null",
         r.status == 200 and j.get("stored") == 0 and j.get("duplicates") == 5
         and j.get("pack") is None, r)
    r = s.upload(build_pack([]))
    j = r.json() if r.status == 200 else {}
    C.ok("empty pack (zero frames): 200 chunks=0 pack=null",
         r.status == 200 and j.get("chunks") == 0 and j.get("pack") is None, r)

    # 3c. commit v1
    NAME = "dir/a b.txt"
    body1 = render_recipe(ents1)
    r = s.commit(NAME, body1)
    j = r.json() if r.status == 201 else {}
    dig1 = file_digest(ents1).hex()
    C.ok("commit recipe: 201 version=1, bytes, chunks, digest as computed here",
         r.status == 201 and j.get("name") == NAME and j.get("version") == 1
         and j.get("bytes") == len(data1) and j.get("chunks") == len(ents1)
         and j.get("digest") == dig1 and isinstance(j.get("created"), int), r)

    # recipe back
    r = s.recipe(NAME)
    C.ok("GET recipe: 200, X-Cutpoint-Version 1, text equals the committed recipe",
         r.status == 200 and r.h("X-Cutpoint-Version") == "1" and r.body == body1,
         (r.status, r.headers, r.body[:200]))

    # 3d. second version as a delta: overwrite a few bytes in place (fixed-size chunks keep
    # alignment), append a tail, repeat an early chunk region at the end
    d2 = bytearray(data1)
    for p in (5000, 700000, 2000000):
        d2[p:p + 10] = b"EDITEDEDIT"
    data2 = bytes(d2) + data1[:CHUNK_SIZE * 2] + b"tail"
    r, ents2, was_delta = s.push(NAME, data2)
    j = r.json() if r.status == 201 else {}
    C.ok("push v2 as a delta against v1: 201 version=2, digest as computed",
         was_delta and r.status == 201 and j.get("version") == 2
         and j.get("digest") == file_digest(ents2).hex(), r)
    r = s.recipe(NAME, 2)
    C.ok("GET recipe v2: the expanded recipe, equal to the full recipe",
         r.status == 200 and r.body == render_recipe(ents2) and r.h("X-Cutpoint-Version") == "2",
         r)
    dl = render_delta(1, ents1, ents2)
    C.ok("delta body is smaller than the full recipe (%d < %d bytes)" % (len(dl), len(render_recipe(ents2))),
         len(dl) < len(render_recipe(ents2)) / 5)
    # a delta with runs out of order, overlapping, repeated
    ents3 = ents1[10:20] + ents1[5:15] + ents1[10:20] + [ents1[0]]
    ops = [("=", 10, 10), ("=", 5, 10), ("=", 10, 10), ("=", 0, 1)]
    r = s.commit(NAME, render_delta(1, ents1, ents3, ops=ops))
    j = r.json() if r.status == 201 else {}
    C.ok("delta with out-of-order, overlapping, repeated runs: 201 version=3",
         r.status == 201 and j.get("version") == 3 and j.get("bytes") == sum(e[1] for e in ents3), r)
    data3 = b"".join(cdata(e[0]) for e in ents3)

    # 4. list
    r = s.list()
    files = r.json().get("files", []) if r.status == 200 else []
    C.ok("list: 3 versions of the name, in version order, with bytes/chunks/digest",
         [(f["name"], f["version"]) for f in files] == [(NAME, 1), (NAME, 2), (NAME, 3)]
         and files[0]["digest"] == dig1 and files[1]["bytes"] == len(data2)
         and files[0]["chunks"] == len(ents1), r)

    # restore
    r = s.restore(NAME)
    etag2 = '"%s"' % file_digest(ents2).hex()
    C.ok("restore latest: 200, bytes identical, ETag = digest, headers",
         r.status == 200 and r.body == data3 and r.h("ETag") == '"%s"' % file_digest(ents3).hex()
         and r.h("Accept-Ranges") == "bytes" and r.h("X-Cutpoint-Version") == "3"
         and r.h("Content-Type") == "application/octet-stream"
         and r.h("Content-Length") == str(len(data3)), (r.status, r.headers))
    r = s.restore(NAME, 2)
    C.ok("restore ?version=2: bytes identical, ETag = digest",
         r.status == 200 and r.body == data2 and r.h("ETag") == etag2, (r.status, r.headers))
    cd = r.h("Content-Disposition") or ""
    C.ok("restore: Content-Disposition attachment; filename*=UTF-8''a%20b.txt",
         cd == "attachment; filename*=UTF-8''a%20b.txt", cd)
    C.ok("pull (recipe + restore, each chunk verified) v1", s.pull(NAME, 1) == data1)
    r = s.restore(NAME, 2, method="HEAD")
    C.ok("HEAD: same headers, no body",
         r.status == 200 and r.body == b"" and r.h("Content-Length") == str(len(data2))
         and r.h("ETag") == etag2, (r.status, r.headers))
    r = s.restore(NAME, 2, headers={"If-None-Match": etag2})
    C.ok("If-None-Match with the ETag -> 304", r.status == 304 and r.body == b"", r)
    r = s.restore(NAME, 2, headers={"If-None-Match": "*"})
    C.ok("If-None-Match: * -> 304", r.status == 304, r)
    r = s.restore(NAME, 2, headers={"If-None-Match": '"%s"' % ("0" * 64)})
    C.ok("If-None-Match with another ETag -> 200", r.status == 200 and r.body == data2, r.status)
    L = len(data2)
    r = s.restore(NAME, 2, headers={"Range": "bytes=1000-99999"})
    C.ok("Range a-b -> 206, Content-Range, exact bytes",
         r.status == 206 and r.body == data2[1000:100000]
         and r.h("Content-Range") == "bytes 1000-99999/%d" % L, (r.status, r.headers))
    r = s.restore(NAME, 2, headers={"Range": "bytes=%d-" % (L - 5000)})
    C.ok("Range a- -> 206 tail", r.status == 206 and r.body == data2[L - 5000:]
         and r.h("Content-Range") == "bytes %d-%d/%d" % (L - 5000, L - 1, L), (r.status, r.headers))
    r = s.restore(NAME, 2, headers={"Range": "bytes=-777"})
    C.ok("Range -n -> 206 last n bytes", r.status == 206 and r.body == data2[-777:]
         and r.h("Content-Range") == "bytes %d-%d/%d" % (L - 777, L - 1, L), (r.status, r.headers))
    r = s.restore(NAME, 2, headers={"Range": "bytes=%d-%d" % (L - 10, L + 1000)})
    if r.status == 206 and r.body == data2[L - 10:]:
        C.note("Range a-b with b past the end: server clamps to LEN-1 (206 '%s'); §4.6 does not say"
               % r.h("Content-Range"))
    else:
        C.note("Range a-b with b past the end: server answered %d %r (4.6 does not say)"
               % (r.status, r.h("Content-Range")))
    r = s.restore(NAME, 2, headers={"Range": "bytes=%d-" % L})
    C.ok("Range starting at LEN -> 416 range_not_satisfiable, Content-Range bytes */LEN",
         is_err(r, 416, "range_not_satisfiable") and r.h("Content-Range") == "bytes */%d" % L,
         (r.status, r.headers, r.body))
    r = s.restore(NAME, 2, headers={"Range": "bytes=-0"})
    C.ok("Range bytes=-0 -> 416", r.status == 416, r)
    r = s.restore(NAME, 2, headers={"Range": "bytes=0-9,20-29"})
    C.ok("several ranges -> 200 whole file", r.status == 200 and r.body == data2, r.status)
    r = s.restore(NAME, 2, headers={"Range": "bytes=zz"})
    C.ok("malformed Range -> 200 whole file", r.status == 200 and r.body == data2, r.status)
    r = s.restore(NAME, 2, headers={"Range": "bytes=0-9", "If-Range": '"%s"' % ("0" * 64)})
    C.ok("If-Range with another ETag -> 200 whole file", r.status == 200 and r.body == data2, r.status)
    r = s.restore(NAME, 2, headers={"Range": "bytes=0-9", "If-Range": etag2})
    C.ok("If-Range with the ETag -> 206", r.status == 206 and r.body == data2[:10], r.status)

    # empty file
    r = s.commit("empty", render_recipe([]))
    C.ok("commit an empty file (end 0 0, digest of the tag alone): 201",
         r.status == 201 and r.json().get("digest") == hashlib.sha256(DIGEST_TAG).hexdigest(), r)
    r = s.restore("empty")
    C.ok("restore empty file: 200, 0 bytes", r.status == 200 and r.body == b"", r)
    r = s.restore("empty", headers={"Range": "bytes=0-"})
    C.ok("Range on an empty file -> 416 bytes */0",
         r.status == 416 and r.h("Content-Range") == "bytes */0", (r.status, r.headers))

    # profile canonical form (3.5)
    ncp = "gear:16384:16k:16384:seed=4242"
    r = s.commit("canon", render_recipe(ents1[:3], profile=ncp))
    rr = s.recipe("canon")
    prof = parse_recipe(rr.body.decode())["profile"] if rr.status == 200 else None
    C.ok("profile stored in canonical form (%s -> %s)" % (ncp, prof),
         r.status == 201 and prof == PROFILE, (r, prof))
    r = s.commit("canon", render_delta(1, ents1[:3], ents1[:2], profile=ncp))
    if r.status == 201:
        C.note("a delta whose profile line is a non-canonical spelling of B's is accepted "
               "(3.4 'MUST equal B's profile line' is compared in canonical form)")
    elif r.status == 400:
        C.note("a delta whose profile line is a non-canonical spelling of B's is refused (400): "
               "3.4 'equal' means textually equal to the canonical line")
    r = s.commit("canon2", render_recipe(ents1[:1], profile="gear:16k:16k:16k:window=64,seed=4242"))
    rr = s.recipe("canon2")
    prof2 = parse_recipe(rr.body.decode())["profile"] if rr.status == 200 else r
    C.note("profile gear:...:window=64,seed=4242 stored as %r (gear's default window dropped)"
           % (prof2,))
    def stored_profile(nm, prof):
        r = s.commit(nm, render_recipe(ents1[:1], profile=prof))
        if r.status != 201:
            return "%d %s" % (r.status, _err(r))
        return parse_recipe(s.recipe(nm).body.decode())["profile"]
    got = stored_profile("canon3", "gear:1024:8192:65536")
    C.ok("canonical sizes: gear:1024:8192:65536 -> gear:1k:8k:64k", got == "gear:1k:8k:64k", got)
    got = stored_profile("canon4", "gear:2k:8k:64k:seed=1,nc=0")
    C.ok("canonical key order (window, magic, nc, seed): -> gear:2k:8k:64k:nc=0,seed=0x1",
         got == "gear:2k:8k:64k:nc=0,seed=0x1", got)
    got = stored_profile("canon5", "crc32:2k:8k:64k:nc=1,window=512")
    C.note("profile crc32:2k:8k:64k:nc=1,window=512 stored as: %s" % got)
    got = stored_profile("canon6", "crc32:2k:8k:64k:nc=0,window=512")
    C.note("profile crc32:2k:8k:64k:nc=0,window=512 stored as: %s" % got)
    for i, prof in enumerate(("crc32:2k:8k:64k:window=64", "rabin:2k:8k:64k:window=48",
                              "gear:2k:8k:64k:nc=2", "gear:2k:8k:64k:window=48",
                              "gear:2k:8k:64k:magic=1", "crc32:64:64:64", "GEAR:2K:8K:64K",
                              "gear:2k:8k:64k:", "gear:2k:8k:64k:seed=0X10", "rabin:2k:8k:64k:seed=1",
                              "crc32:2k:8k:64k:magic=0x1fff", "crc32:2k:8k:64k:magic=8191")):
        C.note("profile %-28s stored as: %s" % (prof, stored_profile("canonx%d" % i, prof)))
    for bad in ("gear:16k:12k:16k", "gear:32:64:128", "gear:8k:4k:16k", "fast:1k:2k:4k",
                "gear:16k:16k:16k:seed=1,seed=2", "gear:2g:2g:2g"):
        r = s.commit("badprofile", render_recipe(ents1[:1], profile=bad))
        C.ok("bad profile %s -> 400" % bad, is_err(r, 400, "bad_request"), r)

    # 5. documented errors
    bad = bytearray(cdata(uniq1[0]))
    bad[0] ^= 1
    fake = rnd.randbytes(5000)
    fid = sha256(fake)
    r = s.upload(build_pack([(fid, fake), (uniq1[1], bytes(bad))], layout=0))
    C.ok("pack with a chunk whose bytes do not match its id -> 400 bad_request",
         is_err(r, 400, "bad_request"), r)
    C.note("mismatch pack error message: %r" % r.json().get("error"))
    r = s.query([fid])
    C.ok("refused pack stored nothing (its good chunk still missing)", r.body == fid, r)
    r = s.upload(build_pack([(fid, fake), (uniq1[1], bytes(bad))], layout=1))
    C.ok("heads-first pack with a mismatching chunk -> 400", is_err(r, 400, "bad_request"), r)
    C.note("heads-first mismatch message: %r" % _err(r))
    for label, pk in (
            ("bad magic", b"XPPACK\x00\x01" + build_pack([(fid, fake)])[8:]),
            ("unknown algorithm", build_pack([(fid, fake)], alg=7)),
            ("unknown layout", build_pack([(fid, fake)], layout=2)),
            ("non-zero reserved byte", build_pack([(fid, fake)])[:15] + b"\x01" + build_pack([(fid, fake)])[16:]),
            ("count in end frame differs", build_pack([(fid, fake)], count=2)),
            ("truncated body", build_pack([(fid, fake)])[:-10]),
            ("bytes after the end", build_pack([(fid, fake)]) + b"x"),
            ("blake3 pack in a sha256 namespace", build_pack([(fid, fake)], alg=ALG_BLAKE3)),
            ("zero-length frame", build_pack([(fid, b"")])),
    ):
        r = s.upload(pk)
        C.ok("pack with %s -> 400" % label, is_err(r, 400, "bad_request"), r)
    big = MAGIC + bytes([ALG_SHA256, 0]) + bytes(6) + struct.pack("<I", MAX_CHUNK + 1) + fid + fake
    r = s.upload(big)
    C.ok("frame length over 64 MiB -> 400", is_err(r, 400, "bad_request"), r)
    C.note("frame length over 64 MiB message: %r" % _err(r))
    r = s.upload(b"\x00" * ((1 << 20) + 100))
    C.ok("pack over max_pack_bytes -> 413 too_large", is_err(r, 413, "too_large"), r)
    s.close_after_error = False
    r = s.upload(b"\x00" * ((1 << 20) + 100))
    try:
        r2 = s.raw("GET", "/v1")
        after = "answered %d" % r2.status
    except IOError as e:
        after = "FAILED (%s)" % e
    C.note("413 answer headers: Connection=%r; the next request on that keep-alive connection %s"
           % (r.h("Connection"), after))
    s.close_after_error = True
    s.close()
    r = s.info()
    C.ok("a fresh connection works after a 413", r.status == 200, r)

    missing_id = sha256(b"never uploaded")
    ents_m = ents1[:2] + [(missing_id, 14, "-", "r"), (missing_id, 14, "-", "r")]
    r = s.commit("m", render_recipe(ents_m))
    j = r.json() if r.status == 409 else {}
    C.ok("commit naming a missing chunk (twice) -> 409 missing_chunks, missing=[id] once",
         is_err(r, 409, "missing_chunks") and j.get("missing") == [missing_id.hex()], r)
    r = s.recipe("m")
    C.ok("refused commit stored nothing (recipe 404 not_found)", is_err(r, 404, "not_found"), r)
    r = s.commit("m", render_recipe(ents1[:2], digest="0" * 64))
    C.ok("commit with a wrong digest -> 400", is_err(r, 400, "bad_request"), r)
    r = s.commit("m", render_recipe(ents1[:2], digest=None))
    C.ok("commit without a digest line -> 400", is_err(r, 400, "bad_request"), r)
    r = s.commit("m", render_recipe(ents1[:2], nl="\r\n"))
    C.ok("commit with CR LF line ends -> 400 naming the line",
         is_err(r, 400, "bad_request") and re.search(r"line", r.json()["error"]), r)
    C.note("CR LF message: %r" % _err(r))
    r = s.commit("m", render_recipe(wrong_len_and_missing(ents1, missing_id)))
    C.ok("commit with both a wrong-length chunk and a missing one -> 400 (check 5 before 6)",
         is_err(r, 400, "bad_request"), r)
    r = s.commit("m", render_recipe(ents1[:2], end=(2, 5)))
    C.ok("commit whose end line does not match -> 400", is_err(r, 400, "bad_request"), r)
    r = s.commit("nolf", render_recipe(ents1[:2])[:-1])
    if r.status == 201:
        C.note("a commit whose last line (end) lacks its LF is ACCEPTED (201), though section 3 "
               "says every line, including the last, ends with LF")
    else:
        C.ok("commit whose last line lacks LF -> 400", is_err(r, 400, "bad_request"), r)
    r = s.commit("m", render_recipe(ents1[:2], hashname="blake3"))
    C.ok("commit with hash blake3 in a sha256 namespace -> 400", is_err(r, 400, "bad_request"), r)
    wrong_len = [ents1[0], (ents1[1][0], ents1[1][1] - 1, "-", "r")]
    r = s.commit("m", render_recipe(wrong_len))
    C.ok("commit naming a present chunk with another length -> 400 (not 409)",
         is_err(r, 400, "bad_request"), r)
    up = render_recipe(ents1[:2]).decode().replace(ents1[0][0].hex(), ents1[0][0].hex().upper())
    r = s.commit("upper", up.encode())
    C.ok("commit with upper-case hex ids accepted (201), stored lower-case",
         r.status == 201 and s.recipe("upper").body == render_recipe(ents1[:2]), r)
    r = s.commit("m", render_delta(99, ents1, ents1[:2]))
    C.ok("delta against a base version that does not exist -> 404 not_found",
         is_err(r, 404, "not_found"), r)
    r = s.commit("m-nobase", render_delta(1, ents1, ents1[:2]))
    C.ok("delta against a name that does not exist -> 404", is_err(r, 404, "not_found"), r)
    r = s.commit(NAME, render_delta(1, ents1, ents1[-2:] + ents1[-1:], ops=[("=", len(ents1) - 2, 3)]))
    C.ok("delta with a run past B's end -> 400", is_err(r, 400, "bad_request"), r)
    r = s.commit(NAME, render_delta(1, ents1, ents1[:2], profile="gear:2k:8k:64k"))
    C.ok("delta whose profile differs from B's -> 400", is_err(r, 400, "bad_request"), r)
    r = s.commit(NAME, render_delta(1, ents1, ents1[:2], end=(3, 1)))
    C.ok("delta whose end does not match the expansion -> 400", is_err(r, 400, "bad_request"), r)
    r = s.raw("POST", s.nspath("/query"), b"\x00" * 33)
    C.ok("query body not a multiple of 32 -> 400", is_err(r, 400, "bad_request"), r)
    r = s.raw("POST", s.nspath("/query"), b"\x00" * 32 * 16385)
    C.ok("query with 16,385 ids -> 413 too_large", is_err(r, 413, "too_large"), r)
    r = s.raw("GET", "/v1/ns/.hidden/files")
    C.ok("namespace starting with '.' -> 400", is_err(r, 400, "bad_request"), r)
    r = s.raw("GET", "/v1/ns/%s/files" % ("a" * 65))
    C.ok("namespace of 65 characters -> 400", is_err(r, 400, "bad_request"), r)
    for badname in ("a//b", "/a", "a/", "a/../b", ".", "x" * 256, "a\x01b"):
        r = s.recipe(badname)
        C.ok("name %r -> 400" % (badname if len(badname) < 20 else badname[:8] + "..."),
             is_err(r, 400, "bad_request"), r)
    long_name = "é" * 127  # 254 bytes: valid
    r = s.commit(long_name, render_recipe(ents1[:1]))
    C.ok("a 254-byte UTF-8 name commits (201) and restores",
         r.status == 201 and s.restore(long_name).body == cdata(uniq1[0]), r)
    r = s.raw("GET", "/v1/nothing-here")
    C.ok("unknown route -> 404 JSON not_found", is_err(r, 404, "not_found"), r)
    r = s.raw("PATCH", s.nspath("/files"))
    C.ok("known route, other method -> 405 empty body", r.status == 405 and r.body == b"", r)
    r = s.restore("no-such-name")
    C.ok("restore of a missing name -> 404 not_found", is_err(r, 404, "not_found"), r)
    r = s.restore(NAME, 77)
    C.ok("restore of a missing version -> 404", is_err(r, 404, "not_found"), r)
    r = s.gc("abc")
    C.ok("gc ?grace=abc -> 400", is_err(r, 400, "bad_request"), r)
    r = s.raw("GET", s.nspath("/recipes/" + s.qname(NAME) + "?version=x"))
    C.ok("?version=x -> 400", is_err(r, 400, "bad_request"), r)

    # delete, version numbers, gc, check
    r = s.delete(NAME, 1)
    C.ok("DELETE ?version=1 -> 200 {deleted: 1}", r.status == 200 and r.json() == {"deleted": 1}, r)
    r = s.recipe(NAME, 1)
    C.ok("deleted version -> 404", is_err(r, 404, "not_found"), r)
    r = s.delete(NAME, 1)
    C.ok("DELETE of a deleted version -> 404", is_err(r, 404, "not_found"), r)
    r = s.delete(NAME, 3)
    C.ok("DELETE latest version 3 -> 200", r.status == 200 and r.json() == {"deleted": 1}, r)
    r = s.commit(NAME, render_recipe(ents2))
    C.ok("next commit after deleting the latest gets version 4 (never reused)",
         r.status == 201 and r.json().get("version") == 4, r)
    r = s.commit("gone", render_recipe(ents1[:1]))
    r = s.delete("gone")
    C.ok("DELETE every version -> 200 {deleted: 1}", r.status == 200 and r.json() == {"deleted": 1}, r)
    r = s.commit("gone", render_recipe(ents1[:1]))
    C.ok("name re-created after deleting every version gets version 2",
         r.status == 201 and r.json().get("version") == 2, r)
    for nm in ["canon", "canon2", "canon3", "canon4", "upper", long_name, "gone", "nolf"] + [
            "canonx%d" % i for i in range(12)] + ["canon5", "canon6"]:
        s.delete(nm)
    # junk: a pack of its own, referenced by one version that is then deleted
    junk = [rnd.randbytes(3000 + i) for i in range(10)]
    jents = [(sha256(b), len(b), "-", "r") for b in junk]
    r = s.upload(build_pack([(e[0], b) for e, b in zip(jents, junk)]))
    r = s.commit("junk", render_recipe(jents))
    C.ok("junk version committed", r.status == 201, r)
    r = s.delete("junk")
    r = s.gc(0)
    j = r.json() if r.status == 200 else {}
    C.ok("gc ?grace=0 -> 200 with its counters; chunks of deleted v1 removed",
         r.status == 200 and all(k in j for k in (
             "referenced_chunks", "packs_deleted", "packs_rewritten", "chunks_removed",
             "bytes_freed", "packs_in_grace", "warnings")) and j["chunks_removed"] >= 10
         and j["packs_deleted"] >= 1, r)
    C.note("gc answer: %s" % r.body.decode())
    r = s.gc()
    j = r.json() if r.status == 200 else {}
    C.ok("gc with default grace -> 200, removes nothing, packs in grace",
         r.status == 200 and j.get("chunks_removed") == 0, r)
    r = s.check()
    j = r.json() if r.status == 200 else {}
    C.ok("check -> 200, no problems", r.status == 200 and j.get("problems") == []
         and all(k in j for k in ("packs", "chunks", "versions")), r)
    C.ok("restore v2 and v4 after gc, byte-identical",
         s.pull(NAME, 2) == data2 and s.pull(NAME, 4) == data2)
    r = s.query([e[0] for e in jents] + [e[0] for e in ents2])
    C.ok("query after gc: the junk chunks are missing again, v2's are present",
         r.status == 200 and r.body == b"".join(e[0] for e in jents), r)
    r = s.query(ids1)
    C.note("after gc, %d of v1's %d distinct chunks (unreferenced since v1/v3 were deleted) are "
           "gone; the rest sit in packs more than half referenced (4.9)"
           % (len(r.body) // 32, len(uniq1)))
    # a push of v1 again: 409 handling (we claim the base's chunks are present; v4's base is
    # v2-like, so the re-upload comes from the query)
    r, _e, _d = s.push(NAME, data1)
    C.ok("push v1's bytes again (delta on v4, missing chunks re-uploaded): 201 v5",
         r.status == 201 and r.json().get("version") == 5 and s.pull(NAME) == data1, r)

    # namespace isolation
    s2 = Store(srv.url, "interop-other")
    s2.info()
    r = s2.query(ids1[:3])
    C.ok("another namespace lacks this namespace's chunks", r.body == b"".join(ids1[:3]), r)
    r = s2.list()
    C.ok("another namespace lists nothing", r.status == 200 and r.json() == {"files": []}, r)

    # 6. cross-checks with the native CLI
    f1 = os.path.join(tmp, "py-pushed.bin")
    out1 = os.path.join(tmp, "native-pulled.bin")
    p = cli(binary, "pull", NAME, "-o", out1, "--store", srv.url, "--ns", NS)
    C.ok("native `cutpoint pull` of a file client.py pushed: byte-identical",
         p.returncode == 0 and open(out1, "rb").read() == data1, p.stderr.decode()[-400:])
    out1b = os.path.join(tmp, "native-pulled-v2.bin")
    p = cli(binary, "pull", NAME, "--version", "2", "-o", out1b, "--store", srv.url, "--ns", NS)
    C.ok("native `cutpoint pull --version 2` (a client.py delta commit): byte-identical",
         p.returncode == 0 and open(out1b, "rb").read() == data2, p.stderr.decode()[-400:])
    native = rnd.randbytes(3 * (1 << 20) + 333)
    with open(f1, "wb") as f:
        f.write(native)
    p = cli(binary, "push", f1, "--name", "native/file.bin", "--store", srv.url, "--ns", NS,
            "--hash", "sha256", "--json")
    C.ok("native `cutpoint push --hash sha256` into the same namespace", p.returncode == 0,
         p.stderr.decode()[-400:])
    C.ok("client.py restores the natively pushed file, each chunk verified: byte-identical",
         s.pull("native/file.bin") == native)
    rr = parse_recipe(s.recipe("native/file.bin").body.decode())
    C.note("native recipe: profile %r, hash %s, %d chunks, LAST/CUT of the first: %s %s"
           % (rr["profile"], rr["hash"], len(rr["entries"]), rr["entries"][0][2], rr["entries"][0][3]))
    r = s.restore("native/file.bin", headers={"Range": "bytes=12345-67890"})
    C.ok("Range on the natively pushed file -> 206 exact", r.status == 206 and r.body == native[12345:67891], r.status)
    # client.py commits a delta on the native version (same profile and hash, copied lines)
    nents = rr["entries"]
    r = s.commit("native/file.bin", render_delta(1, nents, nents[:-1], ops=[("=", 0, len(nents) - 1)],
                                                 profile=rr["profile"]))
    cut = sum(e[1] for e in nents[:-1])
    C.ok("client.py delta on the native recipe (its profile): 201, native pull byte-identical",
         r.status == 201 and cli(binary, "pull", "native/file.bin", "-o", os.path.join(tmp, "n2"),
                                 "--store", srv.url, "--ns", NS).returncode == 0
         and open(os.path.join(tmp, "n2"), "rb").read() == native[:cut], r)
    # native pushes a second version on top of client.py's (different profile: full recipe)
    p = cli(binary, "push", f1, "--name", NAME, "--store", srv.url, "--ns", NS, "--hash", "sha256")
    C.ok("native push on top of client.py's versions of the same name", p.returncode == 0,
         p.stderr.decode()[-400:])
    C.ok("client.py restores it byte-identical", s.pull(NAME) == native)
    p = cli(binary, "ls", "--store", srv.url, "--ns", NS, "--json")
    try:
        nl = json.loads(p.stdout.decode())
    except ValueError:
        nl = None
    mine = s.list().json()["files"]
    C.ok("native `cutpoint ls --json` agrees with GET files (names and versions)",
         p.returncode == 0 and nl is not None and
         sorted((x.get("name"), x.get("version")) for x in nl) ==
         sorted((x["name"], x["version"]) for x in mine), (p.stdout[:300], p.stderr[-300:]))
    p = cli(binary, "push", f1, "--name", "blake", "--store", srv.url, "--ns", NS)
    C.ok("native blake3 push into the sha256 namespace is refused (2.4)", p.returncode != 0,
         p.stdout[-300:])
    C.note("native blake3 push into the sha256 ns: %s" % p.stderr.decode().strip()[-300:])
    r = s.check()
    C.ok("final check -> no problems", r.status == 200 and r.json().get("problems") == [], r)
    s.close()
    s2.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--bin", default="cutpoint")
    ap.add_argument("--store")
    ap.add_argument("--ns", default="default")
    ap.add_argument("--token")
    ap.add_argument("cmd", nargs="*", help="push FILE NAME | pull NAME OUT | ls")
    a = ap.parse_args()
    if a.selftest:
        sys.exit(selftest(a.bin))
    if not a.store or not a.cmd:
        ap.error("--selftest, or --store URL with a command")
    s = Store(a.store, a.ns, a.token)
    s.info()
    if a.cmd[0] == "push":
        r, _e, d = s.push(a.cmd[2], open(a.cmd[1], "rb").read())
        print(r.status, r.body.decode(), "(delta)" if d else "")
        sys.exit(0 if r.status == 201 else 1)
    if a.cmd[0] == "pull":
        with open(a.cmd[2], "wb") as f:
            f.write(s.pull(a.cmd[1]))
    elif a.cmd[0] == "ls":
        print(s.list().body.decode())


if __name__ == "__main__":
    main()
