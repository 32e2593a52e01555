#!/usr/bin/python3
"""A (1+1) local search in 26 lines: the docs/optimizers.md example of an outside optimizer."""
import random
import sys

import shardsim

out = sys.argv[1] if len(sys.argv) > 1 else "my-study"
objective = sys.argv[2] if len(sys.argv) > 2 else "capacity"  # req/s within the SLO (docs/optimizers.md)
problem = shardsim.Problem(model="mixtral-8x7b", cluster="dgx-h100:2", requests=100, objective=objective)
study = problem.study(budget=40)
for seed in (1, 2, 3):
    rng = random.Random(seed)
    best = problem.rules[0]["genes"]                      # start from a Megatron rule plan
    best_score = study.evaluate("one-plus-one", best, seed=seed)["objective"]
    for _ in range(study.budget - 1):
        child = list(best)
        d = rng.randrange(len(child))                     # change one decision
        child[d] = rng.randrange(len(problem.decisions[d]["values"]))
        r = study.evaluate("one-plus-one", child, seed=seed)
        if r["feasible"] and r["objective"] >= best_score:
            best, best_score = child, r["objective"]
report = study.report(out, optimizers="megatron,random,sa", seeds="3")
print(report["summary"])
