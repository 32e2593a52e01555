"""shardsim's open evaluator for Python optimizers (issue 16; docs/open-evaluator.md).

    import shardsim
    p = shardsim.Problem(model="mixtral-8x7b", cluster="dgx-h100:2", requests=200, fidelity="analytic")
    p.decisions                      # [{"name", "block", "values", "ordinal"}, ...]
    r = p.score("tp=8,dp=2")         # {"feasible", "objective", "violations", "metrics", ...}
    p.score_many([...], threads=2)   # in parallel (TBB underneath, the GIL released)
    s = p.study(budget=100)
    s.evaluate("my-method", {"factor 1 (×2)": "tp", ...}, seed=1)  # counted against the budget
    s.report("out/", optimizers="megatron,ga,sa,rl", seeds="1..5")  # summary.md, results.json, anytime.png

Problem options are `shardsim search`'s options without the dashes. A plan is a compact plan
string, an object of decisions (name -> value label or index) or a list of value indices.
Bad input raises ShardsimError (with .source, .field); an infeasible plan is a result with
"feasible": False and its violations, not an error.
"""

import json

from . import _shardsim

__all__ = ["Problem", "Study", "ShardsimError"]


class ShardsimError(ValueError):
    """A request the evaluator refused: `source`, `field` (a JSON pointer) and the message."""

    def __init__(self, error):
        super().__init__(error.get("message", "shardsim error"))
        self.source = error.get("source", "")
        self.field = error.get("field", "")


class _Channel:
    def __init__(self, workers):
        self._service = _shardsim.Service(workers)
        self._next = 0

    def call(self, op, **fields):
        self._next += 1
        request = dict(fields, op=op, id=self._next)
        reply = json.loads(self._service.request(json.dumps(request)))
        if not reply.get("ok"):
            raise ShardsimError(reply.get("error", {}))
        return reply


class Problem:
    """One search problem: its inputs loaded once, plans scored through the shared cache.

    workers: SimGrid worker processes (needed for fidelity="simgrid" or "full"; 0 = analytic only).
    """

    def __init__(self, workers=0, **options):
        self._channel = _Channel(workers)
        self.info = self._channel.call("open", problem=options)["problem"]

    @property
    def decisions(self):
        return self.info["decisions"]

    @property
    def rules(self):
        """The Megatron rule plans of the space: [{"rule", "plan", "genes"}]."""
        return self.info["rules"]

    @property
    def unit(self):
        return self.info["unit"]

    def score(self, plan):
        return self._channel.call("score", plan=plan)["result"]

    def score_many(self, plans, threads=0):
        """Results in order; a malformed plan gets {"error": {...}} in its place."""
        return self._channel.call("score", plans=list(plans), threads=threads)["results"]

    def simulate(self, plan):
        """The result JSON `shardsim simulate --json` writes for this plan (schema shardsim.result/1)."""
        return self._channel.call("simulate", plan=plan)["result"]

    def study(self, budget):
        """A new study; earlier Study objects keep their own (each is numbered by the evaluator)."""
        reply = self._channel.call("study", budget=budget)
        return Study(self._channel, budget, reply["study"])


class Study:
    """An outside optimizer's runs, each with `budget` evaluations, reported beside built-in ones."""

    def __init__(self, channel, budget, number):
        self._channel = channel
        self.budget = budget
        self.number = number

    def evaluate(self, optimizer, plan, seed=1):
        return self._channel.call("evaluate", study=self.number, optimizer=optimizer, seed=seed, plan=plan)["result"]

    def evaluate_many(self, optimizer, plans, seed=1, threads=0):
        return self._channel.call("evaluate", study=self.number, optimizer=optimizer, seed=seed, plans=list(plans),
                                  threads=threads)["results"]

    def report(self, out, optimizers="", seeds="3", reference="", threads=1, log_evals=False):
        """Runs the built-in `optimizers` at the same budget and writes the comparison into `out`."""
        return self._channel.call("report", study=self.number, out=str(out), optimizers=optimizers, seeds=str(seeds),
                                  reference=reference, threads=threads, log_evals=log_evals)
