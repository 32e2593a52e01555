#!/usr/bin/python3
"""Benchmark (tools/bench module): evaluations/s through the Python module vs the built-in driver.

The built-in driver: `shardsim search --optimizers random --budget N --seeds 1 --threads 1`,
timed by its own run clock (results.json runs[0].wall_s: asks, scoring, tells; no start-up).
The module: the very plans that run scored (its journal's genomes), each scored with
Problem.score on a fresh problem (no cache shared with the first), one thread, timed around the
calls. Overhead = module time / driver time − 1 (issue 16's goal: ≤ 5% at the analytic tier).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import shardsim

BINARY = os.environ.get("SHARDSIM_BINARY", os.path.join(os.path.dirname(__file__), "../../build/shardsim"))
OPTIONS = dict(model="deepseek-v3", cluster="dgx-h100:8", requests=200, fidelity="analytic", space="all")


def driver_run(budget):
    """The built-in run's clock and the genomes it scored."""
    with tempfile.TemporaryDirectory() as d:
        args = [BINARY, "search", "--optimizers", "random", "--budget", str(budget), "--seeds", "1", "--threads", "1",
                "--quiet", "--out", d]
        for k, v in OPTIONS.items():
            args += ["--" + k, str(v)]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "results.json")) as f:
            results = json.load(f)
        with open(os.path.join(d, "journal.jsonl")) as f:
            genes = [json.loads(line)["genes"] for line in f.readlines()[1:]]
    return results, genes


def module_run(genes):
    problem = shardsim.Problem(**OPTIONS)  # fresh: nothing cached
    t0 = time.perf_counter()
    scores = [problem.score(g) for g in genes]
    return time.perf_counter() - t0, scores


def main():
    budget = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    driver, module = [], []
    for _ in range(rounds):  # alternating, the minimum of each: this machine's noise is the other's too
        results, genes = driver_run(budget)
        driver.append(results["runs"][0]["wall_s"])
        t, scores = module_run(genes)
        module.append(t)
    run = results["runs"][0]
    driver_s, module_s = min(driver), min(module)
    print("module vs built-in driver: %s on %s, %d requests, analytic, one thread, %d evaluations (%d simulated), best of %d rounds"
          % (OPTIONS["model"], OPTIONS["cluster"], OPTIONS["requests"], len(genes), results["simulated"], rounds))
    print("  built-in driver  %.3f s  %.1f evaluations/s   (rounds: %s)" % (driver_s, len(genes) / driver_s, " ".join("%.3f" % x for x in driver)))
    print("  Python module    %.3f s  %.1f evaluations/s   (rounds: %s)" % (module_s, len(genes) / module_s, " ".join("%.3f" % x for x in module)))
    print("  overhead per evaluation: %+.1f%% (target ≤ 5%%)" % (100 * (module_s / driver_s - 1)))
    best = max((s["objective"] for s in scores if s["feasible"]), default=0)
    print("  best objective: module %.1f, driver %.1f" % (best, run["best_objective"] if run["best_feasible"] else 0))
    print("  this machine: %d cores" % os.cpu_count())


if __name__ == "__main__":
    main()
