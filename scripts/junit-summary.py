#!/usr/bin/env python3
"""One closing line over bun's JUnit reports: "N passed, N failed[, N skipped]".
A report that is missing or empty (a pass that crashed, a guest that did not boot) counts as
one failure. Exit status 1 when anything failed.
  junit-summary.py REPORT.xml…
"""
import os
import sys
import xml.etree.ElementTree as ET

t = f = sk = 0
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
print(f"{t - f - sk} passed, {f} failed" + (f", {sk} skipped" if sk else ""))
sys.exit(1 if f else 0)
