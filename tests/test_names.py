#!/usr/bin/python3
# tests/test_names.py — every doctest case can be run by its ctest: its name holds no ';'.
#
# doctest_discover_tests registers one ctest per case and runs it as --test-case="NAME"; CMake
# cuts a name at ';' (its list separator), so such a ctest selected no case and passed while
# running nothing (21 cases were, until this check).
#
# usage: test_names.py SOURCE_DIR   (exit 0: every name runs; 1: each bad name on one line)
import glob
import os
import re
import sys

NAME = re.compile(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"')


def bad_names(root):
    found = []
    for path in sorted(glob.glob(os.path.join(root, "tests", "**", "*_test.cpp"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in NAME.finditer(line):
                    if ";" in m.group(1):
                        found.append(f"{os.path.relpath(path, root)}:{n}: test case name holds ';', so its ctest runs nothing: {m.group(1)}")
    return found


if __name__ == "__main__":
    bad = bad_names(sys.argv[1] if len(sys.argv) > 1 else ".")
    for b in bad:
        print(b)
    sys.exit(1 if bad else 0)
