"""The open evaluator from Python and over JSON lines (issue 16): run by ctest as python_module
with PYTHONPATH=build/python and SHARDSIM_BINARY set."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import shardsim

BINARY = os.environ["SHARDSIM_BINARY"]
SOURCE = os.environ["SHARDSIM_SOURCE_DIR"]
OPTIONS = dict(model="mixtral-8x7b", cluster="dgx-h100:1", requests=40, seed=3, objective="drain")


def without_wall(result):
    result = json.loads(json.dumps(result))
    del result["provenance"]["wall_s"]
    return result


def converse(lines):
    """The replies of `shardsim serve-evaluator` to `lines` (bytes, one request each), in order."""
    run = subprocess.run([BINARY, "serve-evaluator", "--workers", "0"], input=b"\n".join(lines) + b"\n",
                         capture_output=True, check=True)
    return [json.loads(x) for x in run.stdout.decode("utf-8").splitlines()]


class ModuleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.problem = shardsim.Problem(**OPTIONS)

    def test_simulate_matches_the_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            subprocess.run([BINARY, "simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100:1", "--requests", "40",
                            "--seed", "3", "--offline", "--fidelity", "analytic", "--plan", "tp=4,dp=2", "--json", path],
                           check=True, stdout=subprocess.DEVNULL)
            with open(path) as f:
                cli = json.load(f)
        mine = self.problem.simulate("tp=4,dp=2")
        self.assertEqual(without_wall(cli), without_wall(mine))
        # and its score is the search's objective: the steady output rate of that run
        score = self.problem.score("tp=4,dp=2")
        self.assertTrue(score["feasible"])
        self.assertEqual(score["objective"], cli["metrics"]["steady_output_tok_s"])

    def test_plan_forms_agree(self):
        text = self.problem.score("tp=2,dp=4")
        genes = self.problem.score(self.problem.rules[0]["genes"])
        by_rule = self.problem.score(self.problem.rules[0]["plan"])
        self.assertEqual(genes["objective"], by_rule["objective"])
        self.assertEqual(genes["key"], by_rule["key"])  # a rule plan's text is the space's plan exactly
        # "tp=2,dp=4" keeps the plan defaults' batching limits, which the space's base plan does
        # not have: it is scored as given, outside the space's cache
        self.assertIsNone(text["key"])
        self.assertEqual(text["plan"], "tp=2,dp=4")
        names = {d["name"]: d["values"][v] for d, v in zip(self.problem.decisions, self.problem.rules[0]["genes"])}
        self.assertEqual(self.problem.score(names)["key"], genes["key"])

    def test_infeasible_plans_come_back_with_their_violations(self):
        r = self.problem.score("tp=3")
        self.assertFalse(r["feasible"])
        self.assertGreater(r["violation"], 0)
        fields = [v["field"] for v in r["violations"]]
        self.assertIn("/degrees/tp", fields)

    def test_bad_input_names_the_field(self):
        with self.assertRaises(shardsim.ShardsimError) as e:
            self.problem.score({"no such decision": 0})
        self.assertEqual(e.exception.field, "/no such decision")
        with self.assertRaises(shardsim.ShardsimError) as e:
            shardsim.Problem(model="mixtral-8x7b", requests=0)
        self.assertEqual(e.exception.field, "/requests")
        # A value index of 2^32 (or 2^64 - 1) is refused, not read as 0 and scored as another plan.
        genes = list(self.problem.rules[0]["genes"])
        name = self.problem.decisions[0]["name"]
        for huge in (2**32, 2**64 - 1, -1):
            with self.assertRaises(shardsim.ShardsimError) as e:
                self.problem.score([huge] + genes[1:])
            self.assertEqual(e.exception.field, "/0")
            with self.assertRaises(shardsim.ShardsimError) as e:
                self.problem.score({name: huge})
            self.assertEqual(e.exception.field, "/" + name)

    def test_score_many_equals_one_by_one(self):
        plans = ["tp=8", "tp=2,dp=4", "tp=1,dp=8", "tp=4,dp=2", "bogus=1"]
        many = shardsim.Problem(**OPTIONS).score_many(plans, threads=2)
        for p, r in zip(plans[:4], many[:4]):
            self.assertEqual(r["objective"], self.problem.score(p)["objective"])
        self.assertIn("error", many[4])
        self.assertEqual(many[4]["error"]["field"].split("/")[1], "plans")

    def test_study_budget_is_enforced(self):
        p = shardsim.Problem(**OPTIONS)
        s = p.study(budget=2)
        s.evaluate("mine", "tp=8")
        s.evaluate("mine", "tp=8")  # a repeat still costs an evaluation
        with self.assertRaises(shardsim.ShardsimError) as e:
            s.evaluate("mine", "tp=4,dp=2")
        self.assertEqual(e.exception.field, "/budget")
        with self.assertRaises(shardsim.ShardsimError):
            s.evaluate("ga", "tp=8")  # a built-in optimizer's name
        # A name reaches terminals and reports: a control character (ESC/OSC/BEL) is refused, not stored.
        with self.assertRaises(shardsim.ShardsimError) as e:
            s.evaluate("x\x1b]0;retitled\x07", "tp=8")
        self.assertEqual(e.exception.field, "/optimizer")
        self.assertIn("control character", str(e.exception))

    def test_an_optuna_study_of_30_trials_is_reported(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "study")
            env = dict(os.environ)
            run = subprocess.run([sys.executable, os.path.join(SOURCE, "tools/python/optuna_study.py"), "--model",
                                  "mixtral-8x7b", "--cluster", "dgx-h100:1", "--requests", "40", "--budget", "30",
                                  "--seeds", "1", "--samplers", "tpe", "--builtins", "megatron,random", "--objective", "drain",
                                  "--out", out],
                                 env=env, capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            with open(os.path.join(out, "results.json")) as f:
                results = json.load(f)
            with open(os.path.join(out, "summary.md")) as f:
                summary = f.read()
        runs = [r for r in results["runs"] if r["optimizer"] == "optuna-tpe"]
        self.assertEqual(len(runs), 1)
        self.assertEqual(runs[0]["evaluations"], 30)
        self.assertIn("| optuna-tpe | 1 |", summary)
        self.assertIn("| random | 1 |", summary)


class DocumentedExampleTest(unittest.TestCase):
    def test_the_own_optimizer_example_of_docs_optimizers_md_runs_and_is_reported(self):
        with tempfile.TemporaryDirectory() as d:
            run = subprocess.run([sys.executable, os.path.join(SOURCE, "tools/python/my_optimizer.py"), os.path.join(d, "s"), "drain"],
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertTrue(os.path.exists(os.path.join(d, "s", "results.json")))
        self.assertIn("| one-plus-one | 3 |", run.stdout)
        self.assertIn("| sa | 3 |", run.stdout)


class ServeEvaluatorTest(unittest.TestCase):
    def converse(self, lines):
        run = subprocess.run([BINARY, "serve-evaluator", "--workers", "0"], input="\n".join(lines) + "\n",
                             capture_output=True, text=True, check=True)
        return [json.loads(x) for x in run.stdout.splitlines()]

    def test_malformed_messages_get_errors_and_the_conversation_goes_on(self):
        open_ = json.dumps({"id": 1, "op": "open", "problem": OPTIONS})
        replies = self.converse([open_, "{not json", json.dumps({"id": 2, "op": "score"}),
                                 json.dumps({"id": 3, "op": "teleport"}),
                                 json.dumps({"id": 4, "op": "score", "plan": "tp=4,dp=2"})])
        self.assertEqual(len(replies), 5)
        self.assertTrue(replies[0]["ok"])
        self.assertFalse(replies[1]["ok"])
        self.assertEqual(replies[2]["error"]["field"], "/plans")
        self.assertEqual(replies[2]["id"], 2)
        self.assertEqual(replies[3]["error"]["field"], "/op")
        self.assertTrue(replies[4]["ok"])
        self.assertEqual(replies[4]["result"]["objective"], shardsim.Problem(**OPTIONS).score("tp=4,dp=2")["objective"])

    def test_lines_that_ended_the_service_get_error_replies(self):
        # A number beyond a double, a 0xFF byte, 100,000 levels of nesting: each once ended the
        # service (an uncaught exception, a reply that could not be encoded, a stack overflow).
        open_ = json.dumps({"id": 1, "op": "open", "problem": OPTIONS}).encode()
        lines = [open_, b'{"id": 2, "op": "score", "plan": 1e400}', b'{"id": 3, "op": "sc\xffore"}',
                 b'{"id": ' + b"[" * 100000 + b"]" * 100000 + b', "op": "score"}',
                 json.dumps({"id": 5, "op": "score", "plan": "tp=4,dp=2"}).encode()]
        replies = converse(lines)
        self.assertEqual(len(replies), 5)
        self.assertFalse(replies[1]["ok"])
        self.assertIn("out of the range of a double", replies[1]["error"]["message"])
        self.assertFalse(replies[2]["ok"])
        self.assertFalse(replies[3]["ok"])
        self.assertIn("nested deeper than 128 levels", replies[3]["error"]["message"])
        self.assertTrue(replies[4]["ok"])

    def test_the_command_lines_checks_hold_here(self):
        # seed -1 was taken as 2^64 - 1; workers=2000 forked 2,000 processes, -1 passed silently.
        with self.assertRaises(shardsim.ShardsimError) as e:
            shardsim.Problem(**dict(OPTIONS, seed=-1))
        self.assertEqual(e.exception.field, "/seed")
        for workers in (2000, -1):
            with self.assertRaises(ValueError) as e:
                shardsim.Problem(workers=workers, **OPTIONS)
            self.assertIn("workers", str(e.exception))

    def test_each_study_keeps_its_own_runs(self):
        p = shardsim.Problem(**OPTIONS)
        s1 = p.study(budget=3)
        s2 = p.study(budget=1)
        self.assertNotEqual(s1.number, s2.number)
        s2.evaluate("mine", "tp=8")
        for plan in ("tp=8", "tp=4,dp=2", "tp=2,dp=4"):  # s1's budget, not s2's (spent)
            s1.evaluate("mine", plan)
        with self.assertRaises(shardsim.ShardsimError) as e:
            s1.evaluate("mine", "tp=8")
        self.assertEqual(e.exception.field, "/budget")

    def test_threads_evaluating_while_another_starts_studies_do_not_crash(self):
        # Study.evaluate on three threads while a fourth calls Problem.study(): a SIGSEGV within
        # seconds, 3 of 3 tries, before the service locked its studies. Run apart, so a crash fails
        # this test instead of ending the suite.
        script = """
import sys, threading, shardsim
p = shardsim.Problem(**%r)
s = p.study(budget=100000)
plans = ["tp=8", "tp=4,dp=2", "tp=2,dp=4", "dp=8"]
stop = False
def work(k):
    i = 0
    while not stop:
        s.evaluate("mine", plans[(i + k) %% 4], seed=k + 1)
        i += 1
threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
for t in threads: t.start()
for _ in range(200): p.study(budget=5)
stop = True
for t in threads: t.join()
print("ok")
""" % (OPTIONS,)
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])
        self.assertEqual(run.stdout.strip(), "ok")

    def test_a_line_too_long_gets_an_error_reply_and_the_conversation_goes_on(self):
        open_ = json.dumps({"id": 1, "op": "open", "problem": OPTIONS}).encode()
        huge = b'{"id": 2, "op": "score", "plan": "' + b"x" * (65 << 20) + b'"}'
        replies = converse([open_, huge, json.dumps({"id": 3, "op": "score", "plan": "tp=4,dp=2"}).encode()])
        self.assertEqual(len(replies), 3)
        self.assertFalse(replies[1]["ok"])
        self.assertIn("longer than 64 MiB", replies[1]["error"]["message"])
        self.assertTrue(replies[2]["ok"])
        self.assertEqual(replies[2]["id"], 3)


if __name__ == "__main__":
    unittest.main()
