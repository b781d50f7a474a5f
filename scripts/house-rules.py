#!/usr/bin/env python3
"""Checks the rules that keep the code and the front page easy to pick up (issue 35).

    python3 scripts/house-rules.py

1. No import cycle between the files of any crate of the repository (`scripts/import-cycles.py`
   prints them).
2. At most MAX_LONG_FILES Rust files over MAX_LINES non-test lines, across every crate's
   sources (`src/`, `cli/src/`, `tools/`). Non-test lines: a file's lines up to its first
   top-level `#[cfg(test)]`; files named `tests.rs` are tests and not counted.
3. README.md has at most README_MAX lines.

Prints what it found and exits 1 when a rule is broken, naming the files.
"""

import os
import subprocess
import sys

MAX_LINES = 600
MAX_LONG_FILES = 3
README_MAX = 200
SOURCE_DIRS = ["src", "cli/src", "tools"]


def non_test_lines(path):
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#[cfg(test)]"):
                break
            n += 1
    return n


def long_files(root):
    found = []
    for d in SOURCE_DIRS:
        top = os.path.join(root, d)
        if not os.path.isdir(top):
            continue
        for dirpath, _, files in os.walk(top):
            if "/target" in dirpath:
                continue
            for name in files:
                if not name.endswith(".rs") or name == "tests.rs":
                    continue
                path = os.path.join(dirpath, name)
                n = non_test_lines(path)
                if n > MAX_LINES:
                    found.append((n, os.path.relpath(path, root)))
    return sorted(found, reverse=True)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    broken = False

    cycles = subprocess.run([sys.executable, os.path.join(root, "scripts", "import-cycles.py")])
    if cycles.returncode != 0:
        print("house rules: import cycles (above)")
        broken = True

    found = long_files(root)
    print(f"house rules: {len(found)} files over {MAX_LINES} non-test lines (at most {MAX_LONG_FILES}):")
    for n, path in found:
        print(f"  {n:5} {path}")
    if len(found) > MAX_LONG_FILES:
        print("house rules: too many long files; split one by job")
        broken = True

    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = sum(1 for _ in f)
    print(f"house rules: README.md has {readme} lines (at most {README_MAX})")
    if readme > README_MAX:
        print("house rules: README.md is too long; move detail to docs/")
        broken = True

    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
