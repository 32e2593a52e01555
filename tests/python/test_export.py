"""`shardsim export` (issue 45): every file it writes parses as what the engine reads — the configs as YAML
with the engine's key names and value types, the scripts as bash. Run by ctest as python_module."""

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
                                "--rate", "10", "--out", out], check=True, capture_output=True)
                configs = [f for f in os.listdir(out) if f.endswith(".yaml")]
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
                        self.assertEqual(doc["speculative_config"]["decoding_type"], "MTP")
                    if engine == "vllm":
                        self.assertEqual(doc["speculative-config"]["method"], "mtp")  # a flow mapping: JSON to vLLM
                    if "prefill" in name or "decode" in name:
                        self.assertEqual(doc["disaggregation-mode"], "prefill" if "prefill" in name else "decode")
                for script in ("launch.sh", "bench.sh"):
                    path = os.path.join(out, script)
                    self.assertTrue(os.access(path, os.X_OK), script)
                    subprocess.run(["bash", "-n", path], check=True)


if __name__ == "__main__":
    unittest.main()
