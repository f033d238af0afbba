#!/usr/bin/env python3
"""Checks a self-contained HTML report in headless Chromium (`scripts/test_reports.sh`, `just test`).

    python3 scripts/check_report.py REPORT.html [--expect-plots N] [--expect-tasks T]
                                                [--screenshot OUT.png]
    python3 scripts/check_report.py --self-test

The report is opened twice, each time in a fresh Chromium profile (a tempdir) where every host
name resolves to nothing (--host-resolver-rules), so that any network access fails visibly:

1. over the DevTools protocol (--remote-debugging-pipe): every console message, uncaught
   exception, log entry and network request of the page, the rendered size of each plot, and a
   screenshot (1280 px wide, the whole page down to --max-height px);
2. with --dump-dom: the DOM after load, and the console lines Chromium prints on stderr.

It fails (exit 1, one line per problem, naming the file) unless
(a) no console errors: no uncaught exception, no console.error / console.warn / console.assert,
    no log entry at level error or warning (failed loads, CSP, deprecations), no request to
    anything but the page itself and data: URIs, and no `Uncaught`, `Failed to load` or
    `net::ERR` among the console lines on stderr;
(b) the DOM has as many `<svg class="plot">` as the body's data-plots says (and --expect-plots),
    as many `<section class="task">` (each with its own non-empty data-task) as data-tasks says
    (and --expect-tasks), a `<table class="decisions">` with one `<tbody>` row per task, and
    every plot is drawn at a non-zero size;
(c) the page is not blank: in the screenshot (decoded here with zlib; the PNG filters are undone
    here too), >= 1% of the pixels differ from the most common colour and >= 8 colours appear;
(d) the file itself references nothing outside it: no src=/href= (nor srcset, poster, action, ...)
    other than in-page #anchors and data: URIs, no <link rel=stylesheet>, no CSS @import, no
    CSS url(...) other than #anchors and data: URIs.

On success it prints one line: plots, tasks, screenshot size, the non-background share.
--self-test checks the PNG decoder on every filter type, then checks a good report (must pass),
a bad one (a script error, a missing plot, an external <script src="https://...">: must fail,
naming each of the three) and a blank one (must fail the blank-page check).
Exit status: 0 ok, 1 problems found, 2 cannot run (no Chromium, bad arguments).
"""

import argparse
import base64
import collections
import html.parser
import itertools
import json
import os
import random
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from array import array
from pathlib import Path

WIDTH, HEIGHT = 1280, 2000  # the viewport; the screenshot is the whole page, cut at --max-height
MIN_SHARE, MIN_COLOURS = 0.01, 8  # not blank: share of non-background pixels, distinct colours
TIMEOUT = 60.0  # seconds for one Chromium run
PROG = "check_report"


class CannotRun(Exception):
    """Chromium is missing or did not answer: not a verdict on the report (exit 2)."""


def chromium():
    for name in [os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"]:
        if name and shutil.which(name):
            return shutil.which(name)
    raise CannotRun("no chromium on the PATH; run scripts/setup-browser.sh")


def chromium_flags(profile):
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--window-size={WIDTH},{HEIGHT}",
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--mute-audio",
    ]


# ---------------------------------------------------------------------------------------------
# PNG decoding (8-bit grey/RGB/grey-alpha/RGBA, non-interlaced, filters 0-4)


def _add(a, b, low7={}, high={}):
    """Byte-wise (a + b) mod 256 of two equal-length byte strings (SWAR on Python integers)."""
    n = len(a)
    if n not in low7:
        low7[n], high[n] = int.from_bytes(b"\x7f" * n, "little"), int.from_bytes(b"\x80" * n, "little")
    x, y = int.from_bytes(a, "little"), int.from_bytes(b, "little")
    return (((x & low7[n]) + (y & low7[n])) ^ ((x ^ y) & high[n])).to_bytes(n, "little")


def _unsub(raw, bpp):
    out = bytearray(len(raw))
    for c in range(bpp):
        out[c::bpp] = bytes(map((255).__and__, itertools.accumulate(raw[c::bpp])))
    return out


def _unfilter(ftype, raw, prev, bpp):
    if ftype == 0:
        return bytearray(raw)
    if ftype == 1:
        return _unsub(raw, bpp)
    if ftype == 2:
        return bytearray(_add(raw, prev))
    out = bytearray(raw)
    n = len(raw)
    if ftype == 3:
        for i in range(n):
            left = out[i - bpp] if i >= bpp else 0
            out[i] = (raw[i] + ((left + prev[i]) >> 1)) & 255
        return out
    if ftype == 4:  # Paeth; the first pixel's left and upper-left are 0, so it predicts `up`
        out[:bpp] = _add(raw[:bpp], prev[:bpp])
        i = bpp
        for r, b, c in zip(raw[bpp:], prev[bpp:], prev):
            a = out[i - bpp]
            pa, pb = b - c, a - c  # p - a, p - b with p = a + b - c
            pc = pa + pb
            pa, pb, pc = (pa if pa >= 0 else -pa), (pb if pb >= 0 else -pb), (pc if pc >= 0 else -pc)
            out[i] = (r + (a if pa <= pb and pa <= pc else (b if pb <= pc else c))) & 255
            i += 1
        return out
    raise ValueError(f"unknown PNG filter type {ftype}")


def decode_png(data):
    """(width, height, bytes per pixel, rows: a list of bytearrays)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, ihdr = 8, [], None
    while pos + 8 <= len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if ihdr is None:
        raise ValueError("no IHDR chunk")
    w, h, depth, ctype, _, _, interlace = ihdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    if depth != 8 or channels is None or interlace != 0:
        raise ValueError(f"unsupported PNG: bit depth {depth}, colour type {ctype}, interlace {interlace}")
    raw = zlib.decompress(b"".join(idat))
    stride = w * channels
    if len(raw) < h * (stride + 1):
        raise ValueError(f"truncated PNG data: {len(raw)} bytes for {w}x{h}")
    rows, prev = [], bytes(stride)
    for y in range(h):
        start = y * (stride + 1)
        row = _unfilter(raw[start], raw[start + 1 : start + 1 + stride], prev, channels)
        rows.append(row)
        prev = row
    return w, h, channels, rows


def colour_stats(w, h, channels, rows):
    """(share of pixels that differ from the most common colour, number of distinct colours)."""
    counts = collections.Counter()
    for row in rows:
        if channels == 4:
            px = array("I", bytes(row))
        else:  # widen each pixel to 4 bytes so that one pixel is one machine integer
            wide = bytearray(4 * w)
            for c in range(channels):
                wide[c::4] = row[c::channels]
            px = array("I", bytes(wide))
        counts.update(px)
    _, top = counts.most_common(1)[0]
    return 1 - top / (w * h), len(counts)


def encode_png(w, h, channels, rows, filters):
    """A PNG of the rows, row y filtered with filters[y % len(filters)] (for the self-test)."""
    out, prev = bytearray(), bytes(w * channels)
    for y, row in enumerate(rows):
        f = filters[y % len(filters)]
        enc = bytearray(len(row))
        for i in range(len(row)):
            a = row[i - channels] if i >= channels else 0
            b, c = prev[i], (prev[i - channels] if i >= channels else 0)
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) >> 1
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            enc[i] = (row[i] - pred) & 255
        out += bytes([f]) + enc
        prev = row
    ctype = {1: 0, 3: 2, 2: 4, 4: 6}[channels]

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(bytes(out)))
        + chunk(b"IEND", b"")
    )


# ---------------------------------------------------------------------------------------------
# Chromium over the DevTools protocol (--remote-debugging-pipe: JSON messages, NUL-separated,
# written to the browser's fd 3 and read from its fd 4)


def kill_group(proc):
    """Ends a Chromium this script started (in its own session) with its helper processes."""
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait()


class Browser:
    def __init__(self, profile, log):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds():  # in the child: the pipe ends as fds 3 and 4 (dup first: they may be 3/4)
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = log
        self.proc = subprocess.Popen(
            [chromium(), *chromium_flags(profile), "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(log, "wb"),
            preexec_fn=fds,
            close_fds=False,
            start_new_session=True,  # its helper processes can be ended with it (kill_group)
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buf, self.next_id, self.events = b"", 0, []

    def _died(self, what):
        tail = Path(self.log).read_text(errors="replace").strip().splitlines()[-5:]
        return CannotRun(f"chromium {what} (its stderr ends: {' | '.join(tail) or 'nothing'})")

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise self._died("exited") from None
        return self.next_id

    def recv(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.from_browser], [], [], max(0.0, left))
            if not ready:
                return None
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise self._died("exited")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None, timeout=TIMEOUT):
        want = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self.recv(deadline)
            if msg is None:
                raise self._died(f"did not answer {method} in {timeout:.0f} s")
            if msg.get("id") == want:
                if "error" in msg:
                    raise CannotRun(f"chromium refused {method}: {msg['error']}")
                return msg["result"]
            self.events.append(msg)

    def wait_for(self, pred, deadline):
        while not any(pred(e) for e in self.events):
            msg = self.recv(deadline)
            if msg is None:
                return False
            self.events.append(msg)
        return True

    def drain_quiet(self, quiet, deadline):
        """Collects events until none arrives for `quiet` seconds (or the deadline)."""
        while time.monotonic() < deadline:
            msg = self.recv(min(deadline, time.monotonic() + quiet))
            if msg is None:
                return
            self.events.append(msg)

    def close(self):
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except (CannotRun, subprocess.TimeoutExpired):
            kill_group(self.proc)
        os.close(self.to_browser)
        os.close(self.from_browser)


PAGE_FACTS = """JSON.stringify({
  height: Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0),
  plots: [...document.querySelectorAll('svg.plot')].map((e, i) => {
    const r = e.getBoundingClientRect(), s = e.closest('section.task');
    return {i: i, w: r.width, h: r.height, task: s ? s.getAttribute('data-task') : null};
  }),
})"""


def devtools_run(url, profile, log, max_height):
    """Loads the page; returns (events, page facts, screenshot PNG bytes)."""
    b = Browser(profile, log)
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ["Page", "Runtime", "Log", "Network"]:
            b.call(f"{domain}.enable", {}, s)
        b.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
            s,
        )
        b.events.clear()  # about:blank's
        b.call("Page.navigate", {"url": url}, s)
        deadline = time.monotonic() + TIMEOUT
        if not b.wait_for(lambda e: e.get("method") == "Page.loadEventFired", deadline):
            raise CannotRun(f"the page did not finish loading in {TIMEOUT:.0f} s")
        b.drain_quiet(0.3, time.monotonic() + 3)  # late script errors, late requests
        facts = json.loads(
            b.call("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True}, s)["result"]["value"]
        )
        height = max(1, min(int(facts["height"]), max_height))
        shot = b.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1},
            },
            s,
        )
        b.drain_quiet(0.05, time.monotonic() + 1)
        return b.events, facts, base64.b64decode(shot["data"])
    finally:
        b.close()


def _where(url, line):
    return f" ({url}:{line + 1})" if url and line is not None else (f" ({url})" if url else "")


def devtools_problems(events, page_url):
    """(problems, console texts already reported) from the DevTools events of the page."""
    problems, seen = [], set()
    requests = {}  # requestId -> url, for requests to anything but the page and data: URIs
    failed = {}  # requestId -> errorText
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            exc = d.get("exception", {})
            first = (exc.get("description") or str(exc.get("value", "")) or "").splitlines()
            text = f"{d.get('text', 'Uncaught')} {first[0] if first else ''}".strip()
            seen.add(text)
            problems.append(f"uncaught exception: {text}{_where(d.get('url'), d.get('lineNumber'))}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            text = " ".join(str(a.get("value", a.get("description", a.get("type")))) for a in p.get("args", []))
            frames = p.get("stackTrace", {}).get("callFrames", [])
            where = _where(frames[0]["url"], frames[0]["lineNumber"]) if frames else ""
            seen.add(text)
            problems.append(f"console.{p['type']}: {text}{where}")
        elif m == "Log.entryAdded":
            entry = p["entry"]
            if entry.get("level") in ("error", "warning"):
                seen.add(entry.get("text", ""))
                if entry.get("networkRequestId") in requests:
                    continue  # said once, with the request below
                problems.append(
                    f"console {entry.get('source', '')} {entry['level']}: {entry.get('text', '')}"
                    f"{_where(entry.get('url'), entry.get('lineNumber'))}"
                )
        elif m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if url != page_url and not url.startswith("data:"):
                requests[p["requestId"]] = url
        elif m == "Network.loadingFailed":
            failed[p["requestId"]] = p.get("errorText", "failed")
    for rid, url in requests.items():
        how = f"failed: {failed[rid]}" if rid in failed else "loaded"
        problems.append(f"the page requests {url} ({how}); a report must load nothing")
    for rid, err in failed.items():
        if rid not in requests:
            problems.append(f"the page itself failed to load: {err}")
    return problems, seen


CONSOLE_LINE = re.compile(r':CONSOLE[:(]\d+\)?\] "(.*)", source: (.*) \((\d+)\)\s*$')


def stderr_console_problems(stderr, seen):
    """Console lines on Chromium's stderr (from the --dump-dom run) that name an error."""
    problems = []
    for line in stderr.splitlines():
        m = CONSOLE_LINE.search(line)
        if not m:
            continue
        text = m.group(1)
        if any(k in text for k in ("Uncaught", "Failed to load", "net::ERR")) and text not in seen:
            seen.add(text)
            problems.append(f"console (--dump-dom run): {text} ({m.group(2)}:{m.group(3)})")
    return problems


def dump_dom(url, profile):
    proc = subprocess.Popen(
        [chromium(), *chromium_flags(profile), "--enable-logging=stderr", "--v=0", "--dump-dom", url],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise CannotRun(f"chromium --dump-dom did not finish in {TIMEOUT:.0f} s") from None
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    if proc.returncode != 0 or "<html" not in out.lower():
        raise CannotRun(f"chromium --dump-dom exited with {proc.returncode}: {err.strip().splitlines()[-3:]}")
    return out, err


# ---------------------------------------------------------------------------------------------
# the DOM and the file


def classes(attrs):
    return (dict(attrs).get("class") or "").split()


class DomFacts(html.parser.HTMLParser):
    """Counts the report's conventions: svg.plot, section.task, table.decisions > tbody > tr."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.body = None
        self.plots = 0
        self.tasks = []  # data-task of each section.task
        self.decisions_tables = 0
        self.decision_rows = 0
        self._table_depth = 0  # tables open inside table.decisions, itself included
        self._in_tbody = False

    def handle_starttag(self, tag, attrs):
        c = classes(attrs)
        if tag == "body" and self.body is None:
            self.body = dict(attrs)
        elif tag == "svg" and "plot" in c:
            self.plots += 1
        elif tag == "section" and "task" in c:
            self.tasks.append(dict(attrs).get("data-task"))
        elif tag == "table":
            if self._table_depth:
                self._table_depth += 1
            elif "decisions" in c:
                self.decisions_tables += 1
                self._table_depth = 1
        elif tag == "tbody" and self._table_depth == 1:
            self._in_tbody = True
        elif tag == "tr" and self._table_depth == 1 and self._in_tbody:
            self.decision_rows += 1

    def handle_endtag(self, tag):
        if tag == "table" and self._table_depth:
            self._table_depth -= 1
            self._in_tbody = self._in_tbody and self._table_depth > 0
        elif tag == "tbody" and self._table_depth == 1:
            self._in_tbody = False


def dom_problems(dom, facts, expect_plots, expect_tasks):
    d = DomFacts()
    d.feed(dom)
    d.close()
    problems = []

    def declared(name):
        v = (d.body or {}).get(name)
        if v is None or not v.strip().isdigit():
            problems.append(f"<body> has no whole-number {name} (found {v!r})")
            return None
        return int(v)

    plots, tasks = declared("data-plots"), declared("data-tasks")
    n_tasks = len(d.tasks)
    if plots is not None and d.plots != plots:
        problems.append(f"the page has {d.plots} <svg class=\"plot\"> but data-plots says {plots}")
    if expect_plots is not None and d.plots != expect_plots:
        problems.append(f"the page has {d.plots} <svg class=\"plot\">, expected {expect_plots} (--expect-plots)")
    if tasks is not None and n_tasks != tasks:
        problems.append(f"the page has {n_tasks} <section class=\"task\"> but data-tasks says {tasks}")
    if expect_tasks is not None and n_tasks != expect_tasks:
        problems.append(f"the page has {n_tasks} <section class=\"task\">, expected {expect_tasks} (--expect-tasks)")
    names = [t for t in d.tasks if t and t.strip()]
    if len(names) != n_tasks:
        problems.append(f"{n_tasks - len(names)} <section class=\"task\"> without a data-task name")
    dup = sorted(t for t, k in collections.Counter(names).items() if k > 1)
    if dup:
        problems.append(f"task sections named twice: {', '.join(dup)}")
    if d.decisions_tables != 1:
        problems.append(f"the page has {d.decisions_tables} <table class=\"decisions\">, expected 1")
    elif d.decision_rows != n_tasks:
        problems.append(f"the decisions table has {d.decision_rows} <tbody> rows for {n_tasks} task sections")
    if facts is not None:
        flat = [p for p in facts["plots"] if not (p["w"] >= 1 and p["h"] >= 1)]
        for p in flat:
            problems.append(
                f"plot {p['i'] + 1}{' of task ' + p['task'] if p['task'] else ''} is drawn at "
                f"{p['w']:.0f}x{p['h']:.0f} px"
            )
        if len(facts["plots"]) != d.plots:
            problems.append(f"--dump-dom shows {d.plots} plots, the DevTools run {len(facts['plots'])}")
    return problems, d.plots, n_tasks


REF_ATTRS = {
    "src", "href", "xlink:href", "srcset", "poster", "action", "formaction", "data", "background",
    "manifest", "ping", "longdesc", "codebase", "archive", "imagesrcset",
}
CSS_URL = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)", re.I | re.S)


def local(ref):
    ref = ref.strip()
    return ref.startswith("#") or ref[:5].lower() == "data:"


class References(html.parser.HTMLParser):
    """External references of an HTML file: attributes, <link rel=stylesheet>, CSS."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found = []
        self._in_style = False

    def css(self, text, where):
        if re.search(r"@import\b", text, re.I):
            self.found.append(f"CSS @import in {where}")
        for m in CSS_URL.finditer(text):
            if not local(m.group(2)):
                self.found.append(f"CSS url({m.group(2).strip()}) in {where}")

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        sheet = tag == "link" and "stylesheet" in (a.get("rel") or "").lower().split()
        if sheet:
            self.found.append(f"<link rel=stylesheet href={a.get('href')!r}>")
        for k, v in attrs:
            if v is None or (sheet and k == "href"):
                continue
            if k in REF_ATTRS and not local(v):
                self.found.append(f"<{tag} {k}=\"{v.strip()}\">")
            elif k == "style" or (k in ("fill", "stroke", "filter", "clip-path", "mask") and "url(" in v):
                self.css(v, f"<{tag} {k}=...>")
        if tag == "style":
            self._in_style = True

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.css(data, "<style>")


def file_problems(text):
    r = References()
    r.feed(text)
    r.close()
    return [f"references something outside the file: {f}" for f in dict.fromkeys(r.found)]


# ---------------------------------------------------------------------------------------------


def check(path, expect_plots=None, expect_tasks=None, screenshot=None, max_height=8000):
    """(problems, summary) of one report; raises CannotRun when Chromium cannot be used."""
    path = Path(path).resolve()
    if not path.is_file():
        return ["no such file"], None
    t0 = time.monotonic()
    text = path.read_text(encoding="utf-8", errors="replace")
    url = path.as_uri()
    problems = file_problems(text)
    with tempfile.TemporaryDirectory(prefix="check_report-") as tmp:
        events, facts, png = devtools_run(url, Path(tmp, "profile-devtools"), Path(tmp, "chromium.log"), max_height)
        console, seen = devtools_problems(events, url)
        dom, stderr = dump_dom(url, Path(tmp, "profile-dump-dom"))
        console += stderr_console_problems(stderr, seen)
    dom_p, plots, tasks = dom_problems(dom, facts, expect_plots, expect_tasks)
    problems = console + dom_p + problems
    try:
        w, h, channels, rows = decode_png(png)
        share, colours = colour_stats(w, h, channels, rows)
        if share < MIN_SHARE or colours < MIN_COLOURS:
            problems.append(
                f"the page looks blank: {share:.2%} of the {w}x{h} screenshot differs from its most "
                f"common colour (needs >= {MIN_SHARE:.0%}); it has {colours} colours (needs >= {MIN_COLOURS})"
            )
    except (ValueError, zlib.error) as e:
        problems.append(f"the screenshot cannot be decoded: {e}")
        w = h = share = 0
    if screenshot:
        Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
        Path(screenshot).write_bytes(png)
    summary = (
        f"{plots} plots, {tasks} tasks, screenshot {w}x{h}"
        f"{' (' + str(screenshot) + ')' if screenshot else ''}, {share:.1%} non-background, "
        f"{time.monotonic() - t0:.1f} s"
    )
    return problems, summary


def report(path, problems, summary):
    for p in problems:
        print(f"{PROG}: {path}: {p}", file=sys.stderr)
    if problems:
        print(f"{PROG}: FAILED: {path}: {len(problems)} problem(s)", file=sys.stderr)
    else:
        print(f"{PROG}: ok: {path}: {summary}")


# ---------------------------------------------------------------------------------------------
# self-test


def page(tasks, plots_per_task, declared_plots=None, extra_head="", extra_body=""):
    """A report following the conventions, `tasks` sections with the given number of plots each."""
    rng = random.Random(7)
    pixel = encode_png(2, 2, 3, [bytearray([200, 30, 30, 30, 200, 30]), bytearray([30, 30, 200, 200, 200, 30])], [0])
    sections, rows, n = [], [], 0
    for t, k in zip(tasks, plots_per_task):
        svgs = []
        for j in range(k):
            n += 1
            pts = " ".join(f"{40 + 20 * x},{180 - rng.randint(10, 150)}" for x in range(20))
            svgs.append(
                f'<svg class="plot" width="460" height="200" viewBox="0 0 460 200" role="img">'
                f'<rect x="30" y="10" width="420" height="170" fill="#f4f6fb" stroke="#888"/>'
                f'<polyline points="{pts}" fill="none" stroke="hsl({60 * j + 200},70%,40%)" stroke-width="2"/>'
                f'<text x="240" y="196" font-size="11" text-anchor="middle">step</text></svg>'
            )
        sections.append(
            f'<section class="task" data-task="{t}" id="task-{t}"><h2>{t}</h2>{"".join(svgs)}</section>'
        )
        rows.append(f'<tr><td><a href="#task-{t}">{t}</a></td><td>stable</td><td>0.012</td></tr>')
    declared = n if declared_plots is None else declared_plots
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>analysis report</title>
<style>
body {{ font-family: "DejaVu Sans", sans-serif; margin: 24px; color: #222; }}
table.decisions td, table.decisions th {{ border: 1px solid #bbb; padding: 3px 8px; }}
.badge {{ background: url(data:image/png;base64,{base64.b64encode(pixel).decode()}); }}
</style>{extra_head}</head>
<body data-plots="{declared}" data-tasks="{len(tasks)}">
<h1>Fluctuation report</h1><p class="badge">synthetic page of check_report.py --self-test</p>
<table class="decisions"><thead><tr><th>task</th><th>decision</th><th>MTV</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
{"".join(sections)}
<script>console.log("report ready");</script>
{extra_body}
</body></html>
"""


def self_test():
    ok = True

    def expect(cond, what):
        nonlocal ok
        print(f"{PROG} self-test: {'ok' if cond else 'FAILED'}: {what}")
        ok = ok and cond

    # the PNG decoder against every filter type, both pixel layouts with an alpha channel or not
    rng = random.Random(1)
    for channels in (3, 4):
        w, h = 23, 15
        rows = [bytearray(rng.randrange(256) if rng.random() < 0.5 else 128 for _ in range(w * channels)) for _ in range(h)]
        for filters in ([0], [1], [2], [3], [4], [0, 1, 2, 3, 4]):
            dw, dh, dc, got = decode_png(encode_png(w, h, channels, rows, filters))
            if (dw, dh, dc, got) != (w, h, channels, rows):
                expect(False, f"PNG decode, {channels} channels, filters {filters}")
                break
        else:
            expect(True, f"PNG decode of {channels}-channel images under filters 0-4")
    share, colours = colour_stats(2, 2, 3, [bytearray([1, 2, 3, 1, 2, 3]), bytearray([1, 2, 3, 9, 9, 9])])
    expect((share, colours) == (0.25, 2), f"colour statistics of a 2x2 image (share {share}, {colours} colours)")

    with tempfile.TemporaryDirectory(prefix="check_report-self-test-") as tmp:
        good = Path(tmp, "good.html")
        good.write_text(page(["arc_easy", "piqa", "lambada"], [2, 2, 1]))
        problems, summary = check(good, expect_plots=5, expect_tasks=3)
        for p in problems:
            print(f"  {p}")
        expect(not problems, f"a good report passes ({summary})")

        bad = Path(tmp, "bad.html")
        bad.write_text(
            page(
                ["arc_easy", "piqa"],
                [2, 1],  # piqa lost its heatmap, but data-plots still says 4
                declared_plots=4,
                extra_head='<script src="https://cdn.example.com/plots.js"></script>',
                extra_body='<script>console.warn("axis range empty"); drawHeatmap(document.body);</script>',
            )
        )
        problems, _ = check(bad, expect_plots=4, expect_tasks=2)
        for p in problems:
            print(f"  {p}")
        named = {
            "the script error": any("Uncaught ReferenceError: drawHeatmap is not defined" in p for p in problems),
            "the console warning": any("console.warning: axis range empty" in p for p in problems),
            "the missing plot": any("3 <svg class=\"plot\"> but data-plots says 4" in p for p in problems),
            "the missing plot (--expect-plots)": any("expected 4 (--expect-plots)" in p for p in problems),
            "the external script (in the file)": any(
                "outside the file" in p and "https://cdn.example.com/plots.js" in p for p in problems
            ),
            "the external script (its failed request)": any(
                "requests https://cdn.example.com/plots.js (failed: net::ERR" in p for p in problems
            ),
        }
        for what, found in named.items():
            expect(found, f"the bad report fails, naming {what}")

        blank = Path(tmp, "blank.html")
        blank.write_text(
            '<!doctype html><html><head><meta charset="utf-8"><title>blank</title></head>'
            '<body data-plots="0" data-tasks="0"><table class="decisions"><tbody></tbody></table></body></html>'
        )
        problems, _ = check(blank, expect_plots=0, expect_tasks=0)
        for p in problems:
            print(f"  {p}")
        expect(len(problems) == 1 and "looks blank" in problems[0], "a blank report fails only the blank-page check")
    print(f"{PROG} self-test: {'passed' if ok else 'FAILED'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", nargs="?", help="the HTML file")
    ap.add_argument("--expect-plots", type=int, help="the number of <svg class=\"plot\"> the page must have")
    ap.add_argument("--expect-tasks", type=int, help="the number of <section class=\"task\"> the page must have")
    ap.add_argument("--screenshot", help="keep the screenshot here (PNG); else it is deleted")
    ap.add_argument("--max-height", type=int, default=8000, help="cut the full-page screenshot here (px)")
    ap.add_argument("--self-test", action="store_true", help="prove that the checker passes and fails")
    args = ap.parse_args()
    try:
        if args.self_test:
            return 0 if self_test() else 1
        if not args.report:
            ap.error("give a REPORT.html or --self-test")
        problems, summary = check(args.report, args.expect_plots, args.expect_tasks, args.screenshot, args.max_height)
    except CannotRun as e:
        print(f"{PROG}: cannot run: {args.report or 'self-test'}: {e}", file=sys.stderr)
        return 2
    report(args.report, problems, summary)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
