#!/usr/bin/python3
# tests/code_map.py — keeps docs/architecture.md's map of the code true: the folders' order of
# dependence, where the outside libraries with rules of their own (SimGrid, TBB, MPI, CLI11) may be
# included, and that every source file opens with a comment naming itself.
#
# usage: code_map.py SOURCE_DIR   (exit 0: the map holds; 1: each breach on one line)
#        code_map.py --self-test   (the checker finds planted breaches of each kind)
import os
import re
import sys

# Folders, and the folders each may include from (arrows only point down).
LAYERS = {
    "common": {"common"},
    "topologies": {"common", "topologies"},
    "workloads": {"common", "workloads"},
    "sim": {"common", "topologies", "workloads", "sim"},
    "optimizers": {"common", "topologies", "workloads", "sim", "optimizers"},
    "studies": {"common", "topologies", "workloads", "sim", "optimizers", "studies"},
    "tools": {"common", "topologies", "workloads", "sim", "optimizers", "studies", "tools"},
}
# Inside sim/: plan <- step <- serving <- simgrid, and serving <- whatif.
SIM = {
    "plan": {"plan"},
    "step": {"plan", "step"},
    "serving": {"plan", "step", "serving"},
    "simgrid": {"plan", "step", "serving", "simgrid"},
    "whatif": {"plan", "step", "serving", "whatif"},
}
# Inside optimizers/: space <- algorithms <- search <- report.
OPT = {
    "space": {"space"},
    "algorithms": {"space", "algorithms"},
    "search": {"space", "algorithms", "search"},
    "report": {"space", "algorithms", "search", "report"},
}
# The folders with an order inside them.
INNER = {"sim": SIM, "optimizers": OPT}
# Outside headers that only some files may include: (pattern, may this file include it?).
RESTRICTED = [
    (re.compile(r"^simgrid/|^xbt/"), "SimGrid",
     lambda f: re.match(r"sim/simgrid/simgrid_[^/]*\.cpp$", f) is not None),
    (re.compile(r"^tbb/|^oneapi/tbb"), "TBB",
     lambda f: f in ("optimizers/search/search_driver.cpp", "sim/serving/load_sweep.cpp", "studies/eval_problem.cpp",
                   "studies/eval_study.cpp", "studies/compare_runner.cpp") or f.startswith("tools/")),
    (re.compile(r"^mpi\.h$"), "MPI", lambda f: f == "tools/cli/mpi_evaluation.cpp"),
    (re.compile(r"^CLI/"), "CLI11", lambda f: f.startswith("tools/cli/")),
]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def sources(root):
    for top in LAYERS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith((".cpp", ".hpp")):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def breaches(root):
    found = []
    for f in sorted(sources(root)):
        top = f.split("/")[0]
        with open(os.path.join(root, f), encoding="utf-8") as text:
            lines = text.read().splitlines()
        if not lines or not lines[0].startswith("// " + f):
            found.append(f"{f}:1: the file does not open with a comment naming it ('// {f} — what it owns')")
        for n, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(2)
            target = header.split("/")[0]
            if m.group(1) == '"' and target in LAYERS:
                if target not in LAYERS[top]:
                    found.append(f"{f}:{n}: {top}/ includes {header}, from {target}/, above it")
                elif top == target and top in INNER:
                    order = INNER[top]
                    mine, theirs = f.split("/")[1], header.split("/")[1]
                    if mine in order and theirs not in order[mine]:
                        found.append(f"{f}:{n}: {top}/{mine}/ includes {header}, from {top}/{theirs}/, above it")
                continue
            for pattern, library, allowed in RESTRICTED:
                if pattern.search(header) and not allowed(f):
                    found.append(f"{f}:{n}: includes {library} ({header}), which docs/architecture.md keeps out of it")
    return found


def self_test():
    """The checker finds each kind of breach in a planted tree, and nothing in a clean one."""
    import tempfile
    planted = {
        "common/a.hpp": '// common/a.hpp — x\n#include "sim/plan/plan.hpp"\n',
        "sim/plan/b.cpp": '// sim/plan/b.cpp — x\n#include "sim/step/lowering.hpp"\n#include <tbb/parallel_for.h>\n',
        "optimizers/c.cpp": "#include <simgrid/s4u.hpp>\n#include <mpi.h>\n",
        "optimizers/space/g.hpp": '// optimizers/space/g.hpp — x\n#include "optimizers/search/search_driver.hpp"\n',
        "sim/simgrid/simgrid_d.cpp": '// sim/simgrid/simgrid_d.cpp — x\n#include <simgrid/s4u.hpp>\n#include "sim/serving/serving.hpp"\n',
        "tools/cli/e.cpp": "// tools/cli/e.cpp — x\n#include <CLI/CLI.hpp>\n#include <tbb/task_group.h>\n",
    }
    expected = [
        "common/a.hpp:2: common/ includes",
        "optimizers/c.cpp:1: the file does not open",
        "optimizers/c.cpp:1: includes SimGrid",
        "optimizers/c.cpp:2: includes MPI",
        "optimizers/space/g.hpp:2: optimizers/space/ includes optimizers/search/",
        "sim/plan/b.cpp:2: sim/plan/ includes sim/step/",
        "sim/plan/b.cpp:3: includes TBB",
    ]
    with tempfile.TemporaryDirectory() as root:
        for path, text in planted.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as out:
                out.write(text)
        found = breaches(root)
    ok = len(found) == len(expected) and all(f.startswith(e) for f, e in zip(found, expected))
    print("\n".join(found))
    print("self-test " + ("passed" if ok else "FAILED: expected breaches starting with " + repr(expected)))
    return 0 if ok else 1


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print("usage: code_map.py SOURCE_DIR | --self-test", file=sys.stderr)
        return 2
    found = breaches(sys.argv[1])
    for b in found:
        print(b)
    print(f"{len(found)} breach(es) of docs/architecture.md's map")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
