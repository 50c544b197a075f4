"""checks.py: the count every Python test keeps. check(ok, what) prints one line ("ok" or
"FAIL" and what was checked) and counts it; summary() prints "N passed, M failed", always
the test's last line, and returns the exit status (non-zero when anything failed)."""
counts = {"passed": 0, "failed": 0}


def check(ok, what):
    counts["passed" if ok else "failed"] += 1
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    return ok


def summary():
    print(f"{counts['passed']} passed, {counts['failed']} failed", flush=True)
    return 1 if counts["failed"] else 0
