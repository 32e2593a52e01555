#!/usr/bin/python3
"""Optuna's TPE and CMA-ES beside shardsim's built-in optimizers, in one comparison (issue 16).

Each sampler runs once per seed with the study's budget of evaluations through the module
(shardsim.Problem / Study: the shared cache and budget accounting of `shardsim search`); then
the built-in optimizers run at the same budget and one report is written: summary.md with the
statistics table (median best with its 95% interval, Mann-Whitney U with Holm, A12),
results.json and anytime.png, where optuna-tpe and optuna-cmaes are rows like ga, sa and rl.

    PYTHONPATH=build/python /usr/bin/python3 tools/python/optuna_study.py \
        --model mixtral-8x7b --cluster dgx-h100:2 --requests 200 --budget 60 --seeds 1..3 --out optuna-study

TPE samples each decision as a categorical; CMA-ES (continuous) samples each decision's value
index as an integer. An infeasible plan is told as minus its violation, so the samplers learn
to avoid it; it still costs an evaluation, as it does for the built-in optimizers. Like the
built-in ga, sa and rl, each sampler first evaluates the Megatron rule plans (enqueued trials;
--no-seed-rules starts them cold).
"""

import argparse
import logging
import sys

import optuna

import shardsim


def seeds_of(text):
    if ".." in text:
        a, b = text.split("..")
        return list(range(int(a), int(b) + 1))
    return list(range(1, int(text) + 1))


def run_sampler(problem, study, name, seed, budget, seed_rules):
    decisions = problem.decisions
    if name == "tpe":
        sampler = optuna.samplers.TPESampler(seed=seed)
    else:
        sampler = optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)

    def objective(trial):
        if name == "tpe":
            plan = {d["name"]: trial.suggest_categorical(d["name"], d["values"]) for d in decisions}
        else:
            plan = {d["name"]: trial.suggest_int(d["name"], 0, len(d["values"]) - 1) for d in decisions}
        r = study.evaluate("optuna-" + name, plan, seed=seed)
        return r["objective"] if r["feasible"] else -r["violation"]

    s = optuna.create_study(direction="maximize", sampler=sampler)
    if seed_rules:  # the Megatron rule plans first, as the built-in ga, sa and rl start
        for rule in problem.rules[:budget]:
            g = rule["genes"]
            s.enqueue_trial({d["name"]: (d["values"][v] if name == "tpe" else v) for d, v in zip(decisions, g)})
    s.optimize(objective, n_trials=budget)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mixtral-8x7b")
    ap.add_argument("--cluster", default="dgx-h100:2")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--space", default="all")
    ap.add_argument("--fidelity", default="analytic")
    ap.add_argument("--objective", default="capacity", help="capacity (req/s within the SLO) | saturated | drain | goodput | drain-tpot | tokens-per-joule")
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--seeds", default="3")
    ap.add_argument("--samplers", default="tpe,cmaes")
    ap.add_argument("--builtins", default="megatron,random,ga,sa,rl")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-seed-rules", action="store_true", help="do not start the samplers from the Megatron rule plans")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    optuna.logging.set_verbosity(logging.WARNING)
    workers = 0 if a.fidelity == "analytic" else a.threads
    try:
        problem = shardsim.Problem(workers=workers, model=a.model, cluster=a.cluster, requests=a.requests, objective=a.objective,
                                   space=a.space, fidelity=a.fidelity)
        study = problem.study(budget=a.budget)
        for name in a.samplers.split(","):
            for seed in seeds_of(a.seeds):
                run_sampler(problem, study, name, seed, a.budget, not a.no_seed_rules)
        rep = study.report(a.out, optimizers=a.builtins, seeds=a.seeds, threads=a.threads)
    except shardsim.ShardsimError as e:
        print("error: " + str(e), file=sys.stderr)
        return 2
    print(rep["summary"])
    print("wrote " + a.out + "/{" + ", ".join(rep["files"]) + "}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
