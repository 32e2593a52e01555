"""`shardsim export` (issue 45): every file it writes parses as what the engine reads — the configs as YAML
with the engine's key names and value types, the scripts as bash. Run by ctest as python_module."""

import json
import os
import subprocess
import tempfile
import unittest

import yaml

BINARY = os.environ["SHARDSIM_BINARY"]

CASES = [
    ("vllm", "deepseek-v3", "dgx-h100:4", "tp=1,attn_dp=16,ep=16,dp=2,kv=fp8,engine=vllm,redundant_experts=16,spec_tokens=2"),
    ("sglang", "deepseek-v3", "dgx-h100:4", "tp=1,attn_dp=16,ep=16,dp=2,kv=fp8,engine=sglang,two_batch_overlap=on,a2a=auto"),
    ("trtllm", "deepseek-v3", "dgx-h100:4", "tp=1,attn_dp=16,ep=16,dp=2,kv=fp8,engine=trtllm,spec_tokens=3,cuda_graphs=on"),
    ("sglang", "mixtral-8x7b", "dgx-h100:1+dgx-h200:1", "prefill:tp=8,engine=sglang/decode:tp=4,dp=2,engine=sglang"),
    ("trtllm", "mixtral-8x7b", "dgx-h100:2", "prefill:tp=2,dp=4,engine=trtllm/decode:tp=4,dp=2,engine=trtllm"),
    ("vllm", "mixtral-8x7b", "dgx-h100:2", "prefill:tp=2,dp=4,engine=vllm/decode:tp=4,dp=2,engine=vllm"),
]

# Keys whose values the engines parse as whole numbers, per engine.
INTEGERS = {"vllm": ["tensor-parallel-size", "data-parallel-size", "max-num-seqs", "max-num-batched-tokens"],
            "sglang": ["tp-size", "max-running-requests", "chunked-prefill-size"],
            "trtllm": ["tensor_parallel_size", "moe_expert_parallel_size", "max_batch_size", "max_num_tokens"]}


class ExportTest(unittest.TestCase):
    def test_files_parse(self):
        for engine, model, cluster, plan in CASES:
            with self.subTest(engine=engine, plan=plan), tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "x")
                subprocess.run([BINARY, "export", "--model", model, "--cluster", cluster, "--plan", plan, "--engine", engine,
                                "--rate", "10", "--dynamo", "--out", out], check=True, capture_output=True)
                configs = [f for f in os.listdir(out) if f.endswith(".yaml") and f.startswith(engine) and f != "trtllm-disagg.yaml"]
                self.assertTrue(configs)
                for name in configs:
                    with open(os.path.join(out, name), encoding="utf-8") as f:
                        doc = yaml.safe_load(f)
                    self.assertIsInstance(doc, dict, name)
                    for key in INTEGERS[engine]:
                        if key in doc:
                            self.assertIsInstance(doc[key], int, f"{name}: {key}")
                    if engine == "trtllm":
                        self.assertIsInstance(doc["kv_cache_config"], dict)
                    if "spec_tokens" in plan and engine == "trtllm":
                        self.assertEqual(doc["speculative_config"]["decoding_type"], "MTP")
                    if "spec_tokens" in plan and engine == "vllm":
                        self.assertEqual(doc["speculative-config"]["method"], "mtp")  # a flow mapping: JSON to vLLM
                    if ("prefill" in name or "decode" in name) and engine == "sglang":
                        self.assertEqual(doc["disaggregation-mode"], "prefill" if "prefill" in name else "decode")
                # The Dynamo deployment: one worker service per pool, its replicas and GPUs per node.
                with open(os.path.join(out, "dynamo-deploy.yaml"), encoding="utf-8") as f:
                    dgd = yaml.safe_load(f)
                self.assertEqual(dgd["kind"], "DynamoGraphDeployment")
                services = dgd["spec"]["services"]
                self.assertEqual(services["Frontend"]["componentType"], "frontend")
                workers = [v for v in services.values() if v["componentType"] == "worker"]
                self.assertEqual(len(workers), 2 if "/" in plan else 1)
                for w in workers:
                    self.assertIsInstance(w["replicas"], int)
                    args = w["extraPodSpec"]["mainContainer"]["args"]
                    self.assertTrue(all(isinstance(a, str) for a in args))
                    if engine == "trtllm":  # the LLM API options as JSON, nested as in the YAML
                        options = json.loads(args[args.index("--override-engine-args") + 1])
                        self.assertIsInstance(options["kv_cache_config"], dict)
                        self.assertIsInstance(options["max_batch_size"], int)
                if engine == "trtllm" and "/" in plan:
                    with open(os.path.join(out, "trtllm-disagg.yaml"), encoding="utf-8") as f:
                        front = yaml.safe_load(f)
                    self.assertEqual(front["context_servers"]["num_instances"], len(front["context_servers"]["urls"]))
                    self.assertEqual(front["generation_servers"]["num_instances"], 2)
                for script in ("launch.sh", "bench.sh", "dynamo.sh"):
                    path = os.path.join(out, script)
                    self.assertTrue(os.access(path, os.X_OK), script)
                    subprocess.run(["bash", "-n", path], check=True)


if __name__ == "__main__":
    unittest.main()
