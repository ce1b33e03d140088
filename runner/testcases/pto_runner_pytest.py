# pto-runner's pytest plugin: every pytest process of a step with `tests: pytest` loads it (`-p
# pto_runner_pytest` in PYTEST_ADDOPTS, this file's directory on PYTHONPATH), so the step's command is not
# changed and a step that calls pytest twice reports twice. It does nothing unless PTO_RUNNER_TESTS_DIR is set.
#
# It writes one JUnit report per process, PTO_RUNNER_TESTS_DIR/pytest-PID-N.xml, as the tests end (each
# <testcase> flushed when its test ends; the closing tags at the end of the session), so a process that dies
# in a test still leaves the tests before it, and a <pto-started name=ID/> before each test names the one it
# died in. A test case's classname::name is pytest's node id (what a rerun selects by), its file and line are
# kept (as xunit1 does), its captured output is kept for failures only (capped), and the cards its output
# names (`device=N`, pypto's `-> device N`) are a property.
#
# PTO_RUNNER_TESTS_SKIP names a file of node ids already passed or skipped in an earlier attempt of the step:
# those are deselected (a retry runs only what has not passed; a pytest call the first attempt never reached
# runs whole). PTO_RUNNER_TESTS_ONLY names a file of the node ids a shard of a split step runs: every other
# test is deselected.
#
# PTO_RUNNER_TESTS_COLLECT names a directory: the step's command runs with every pytest process collecting
# only. Each writes the node ids it collected, one per line, to collected-PID-N.txt there, deselects them all
# and exits 0; no report is written. This is how a split step's tests are collected once, with the step's own
# command, arguments and environment. A process left with nothing to run, and with PTO_RUNNER_TESTS_ALLOW_EMPTY one that collected
# nothing, exits 0 instead of pytest's 5: pto-runner counts the tests itself.
#
# Written for Debian's pytest 7.2 and later; only public hooks.
import os
import re

import pytest

_ILLEGAL_XML = re.compile("[^\u0009\u000A\u000D\u0020-\u007E\u0080-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]")
_CARD_MARKS = re.compile(r"(?:\bdevice=|-> device |\bdevice_id=)(\d+)")
_MAX_OUTPUT = 64 * 1024
_MAX_MESSAGE = 4096


def _text(value):
    return _ILLEGAL_XML.sub(lambda m: "#x%02X" % ord(m.group()), str(value))


def _attr(value):
    return (_text(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;"))


def _body(value):
    return _text(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Report:
    def __init__(self, directory, allow_empty, skip, only):
        self.allow_empty = allow_empty
        self.skip = skip
        self.only = only
        self.deselected_all = False
        self.cases = {}
        n = 0
        while True:
            path = os.path.join(directory, "pytest-%d-%d.xml" % (os.getpid(), n))
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                break
            except FileExistsError:
                n += 1
        self.out = os.fdopen(fd, "w", encoding="utf-8")
        self.out.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n<testsuite name="pytest" pid="%d">\n'
                       % os.getpid())
        self.out.flush()

    def started(self, nodeid):
        self.out.write('<pto-started name=%s/>\n' % ('"' + _attr(nodeid) + '"'))
        self.out.flush()

    def phase(self, report):
        case = self.cases.setdefault(report.nodeid, {"duration": 0.0, "outcome": "passed", "phase": "",
                                                     "message": "", "longrepr": "", "output": "",
                                                     "location": report.location})
        case["duration"] += getattr(report, "duration", 0.0) or 0.0
        # Each phase's report carries the captured output of the phases before it too: the last one is whole.
        out = "".join(content for _, content in report.sections)
        if out:
            case["output"] = out[-_MAX_OUTPUT:]
        if report.outcome == "failed" and case["outcome"] != "failed":
            case["outcome"] = "failed"
            case["phase"] = report.when
            longrepr = getattr(report, "longreprtext", "") or ""
            case["longrepr"] = longrepr[-_MAX_OUTPUT:]
            crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
            lines = longrepr.strip().splitlines()
            case["message"] = (crash.message if crash is not None else lines[-1] if lines else "failed")[:_MAX_MESSAGE]
        elif report.outcome == "skipped" and case["outcome"] == "passed":
            case["outcome"] = "skipped"
            longrepr = report.longrepr
            case["message"] = str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)[:_MAX_MESSAGE]

    def finished(self, nodeid):
        case = self.cases.pop(nodeid, None)
        if case is None:
            return
        path, _, name = nodeid.partition("::")
        file, line, _ = case["location"]
        cards = sorted({int(m) for m in _CARD_MARKS.findall(case["output"] + "\n" + case["longrepr"])})
        xml = '<testcase classname="%s" name="%s" file="%s" line="%d" time="%.6f">' % (
            _attr(path), _attr(name), _attr(file), (line or 0) + 1, case["duration"])
        if cards:
            xml += '<properties><property name="pto.cards" value="%s"/></properties>' % ",".join(map(str, cards))
        if case["outcome"] == "failed":
            tag = "failure" if case["phase"] == "call" else "error"
            xml += '<%s message="%s">%s</%s>' % (tag, _attr(case["message"]), _body(case["longrepr"]), tag)
            if case["output"]:
                xml += "<system-out>%s</system-out>" % _body(case["output"])
        elif case["outcome"] == "skipped":
            xml += '<skipped message="%s"/>' % _attr(case["message"])
        xml += "</testcase>\n"
        self.out.write(xml)
        self.out.flush()

    def close(self):
        self.out.write("</testsuite>\n</testsuites>\n")
        self.out.close()


def _ids(path):
    with open(path, encoding="utf-8") as f:
        return {line.rstrip("\n") for line in f if line.strip()}


class _Collector:
    def __init__(self, directory):
        n = 0
        while True:
            path = os.path.join(directory, "collected-%d-%d.txt" % (os.getpid(), n))
            try:
                self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                break
            except FileExistsError:
                n += 1

    def write(self, items):
        if self.fd is None:
            return
        os.write(self.fd, "".join(item.nodeid + "\n" for item in items).encode("utf-8"))
        os.close(self.fd)
        self.fd = None


_report = None
_collector = None


def pytest_configure(config):
    global _report, _collector
    if _report is not None or _collector is not None:
        return
    collect = os.environ.get("PTO_RUNNER_TESTS_COLLECT")
    if collect:
        # Every process collects (with pytest-xdist the workers do, and the controller, left with nothing to
        # run, must exit 0 too); the ids they write alike are one.
        _collector = _Collector(collect)
        return
    # With pytest-xdist the workers run the tests and report; their controller only relays them.
    if getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput"):
        return
    directory = os.environ.get("PTO_RUNNER_TESTS_DIR")
    if not directory:
        return
    skip = _ids(os.environ["PTO_RUNNER_TESTS_SKIP"]) if os.environ.get("PTO_RUNNER_TESTS_SKIP") else set()
    only = _ids(os.environ["PTO_RUNNER_TESTS_ONLY"]) if os.environ.get("PTO_RUNNER_TESTS_ONLY") else None
    _report = _Report(directory, os.environ.get("PTO_RUNNER_TESTS_ALLOW_EMPTY") == "1", skip, only)


# Last: after -k, -m and --deselect have made their choice, so what is collected (or kept) is what the step's
# command selects.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if _collector is not None:
        # Collected, written, and none run: the shards run them.
        _collector.write(items)
        if items:
            config.hook.pytest_deselected(items=list(items))
            items[:] = []
        return
    if _report is None or (not _report.skip and _report.only is None):
        return
    def wanted(item):
        return item.nodeid not in _report.skip and (_report.only is None or item.nodeid in _report.only)
    keep = [item for item in items if wanted(item)]
    gone = [item for item in items if not wanted(item)]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = keep
        _report.deselected_all = not keep


def pytest_runtest_logstart(nodeid, location):
    if _report is not None:
        _report.started(nodeid)


def pytest_runtest_logreport(report):
    if _report is not None:
        _report.phase(report)


def pytest_runtest_logfinish(nodeid, location):
    if _report is not None:
        _report.finished(nodeid)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if _collector is not None:
        if session.exitstatus == 5:  # nothing left to run: collected, as asked
            session.exitstatus = 0
        return
    if _report is None:
        return
    if session.exitstatus == 5 and (_report.deselected_all or _report.allow_empty):
        session.exitstatus = 0
    _report.close()
