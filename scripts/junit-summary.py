#!/usr/bin/env python3
"""One closing line over bun's JUnit reports: "N passed, N failed[, N skipped]".
A report that is missing or empty (a pass that crashed, a guest that did not boot) counts as
one failure. Each failed test is named (with the first lines of its message) just before that
line, because CI shows only the tail of the log. Exit status 1 when anything failed.
  junit-summary.py REPORT.xml…
"""
import os
import sys
import xml.etree.ElementTree as ET

t = f = sk = 0
failed = []
for path in sys.argv[1:]:
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        print(f"[test] no report at {path}: counted as 1 failed", file=sys.stderr)
        t += 1; f += 1
        continue
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    t += sum(int(s.get("tests", 0)) for s in suites)
    f += sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    sk += sum(int(s.get("skipped", 0)) for s in suites)
    for case in root.iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            text = (bad.get("message") or "") + "\n" + (bad.text or "")
            lines = [l.strip() for l in text.splitlines() if l.strip()][:6]
            failed.append((os.path.basename(path), case.get("classname", ""), case.get("name", ""), lines))
for report, suite, name, lines in failed:
    print(f"[test] FAILED ({report}) {suite} > {name}")
    for line in lines:
        print(f"[test]     {line[:300]}")
print(f"{t - f - sk} passed, {f} failed" + (f", {sk} skipped" if sk else ""))
sys.exit(1 if f else 0)
