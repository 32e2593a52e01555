// tests/workloads/model_test.cpp — model specs: presets against their published (card) figures, hand-computed
// parameter counts, KV sizes, HF config.json import (fixtures in tests/data/hf-*.json), the JSON
// round trip, validation messages that name the field, and the `shardsim models` command.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "tests/cli_runner.hpp"
#include "workloads/model.hpp"

using namespace shardsim;

namespace {

const std::string kData = std::string(SHARDSIM_SOURCE_DIR) + "/tests/data/";

const ModelSpec& preset(const std::string& name) {
  const ModelSpec* m = find_model_preset(name);
  REQUIRE_MESSAGE(m != nullptr, "missing preset " << name);
  return *m;
}

ModelSpec hf_fixture(const std::string& file) {
  const std::string path = kData + file;
  return model_from_hf_config(parse_json(read_text_file(path), path), path);
}

// A small valid GQA MoE spec in our format; tests break one field at a time.
json small_moe() {
  return json{{"layers", 4},   {"hidden", 256},    {"attention", "gqa"}, {"heads", 8},
              {"kv_heads", 2}, {"head_dim", 32},   {"experts", 8},       {"top_k", 2},
              {"expert_ffn", 512}, {"vocab", 1000}};
}

// The field named by the InputError that loading `j` throws ("<no error>" if it loads).
std::string error_field(const json& j) {
  try {
    model_from_json(j, "test.json");
  } catch (const InputError& e) {
    return e.field();
  }
  return "<no error>";
}

std::string error_text(const json& j) {
  try {
    model_from_json(j, "test.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("model presets: every preset listed, computed params within 3% of the card figures") {
  const std::set<std::string> expected = {"dbrx",          "deepseek-v3",     "gpt-oss-120b", "kimi-k2",
                                          "llama2-70b",    "llama3-70b",      "llama3.1-405b", "llama3.1-70b", "llama3.1-8b", "llama4-maverick",
                                          "mixtral-8x22b", "mixtral-8x7b",    "moe-1.6t",     "qwen3-235b-a22b",
                                          "qwen3-30b-a3b", "qwen3-32b"};
  std::set<std::string> names;
  for (const ModelSpec& m : model_presets()) names.insert(m.name);
  CHECK(names == expected);

  for (const ModelSpec& m : model_presets()) {
    INFO("preset " << m.name);
    CHECK_FALSE(m.comment.empty());
    REQUIRE(m.card_total_params > 0);
    const double total = static_cast<double>(m.total_params());
    CHECK(std::abs(total - m.card_total_params) / m.card_total_params < 0.03);
    if (m.card_active_params > 0) {
      const double active = static_cast<double>(m.active_params_as_card());
      CHECK(std::abs(active - m.card_active_params) / m.card_active_params < 0.03);
    } else {
      CHECK(m.name == "moe-1.6t");  // our own design: no published active figure
    }
    CHECK(m.active_params() <= m.total_params());
    if (!m.is_moe()) CHECK(m.active_params() == m.total_params());
  }
}

TEST_CASE("model params: hand-computed exact counts") {
  const ModelSpec& l70 = preset("llama3-70b");
  // q + k + v + o = 8192·(8192 + 2·1024) + 8192·8192 = 83,886,080 + 67,108,864
  CHECK(l70.attention_params() == 150'994'944);
  // SwiGLU: 3 · 8192 · 28672
  CHECK(l70.dense_ffn_params() == 704'643'072);
  // per layer 150,994,944 + 704,643,072 + 2·8192 norms = 855,654,400; × 80 = 68,452,352,000;
  // + 2 · 128256 · 8192 (embedding + LM head) = 2,101,346,304; + 8192 final norm
  CHECK(l70.total_params() == 70'553'706'496);
  CHECK(l70.active_params() == l70.total_params());

  // Llama-2-70B: same layers, vocab 32000: 68,452,352,000 + 2·32000·8192 + 8192
  CHECK(preset("llama2-70b").total_params() == 68'976'648'192);

  const ModelSpec& mx = preset("mixtral-8x7b");
  // attention 4096·(4096 + 2·1024) + 4096·4096 = 41,943,040; expert 3·4096·14336 = 176,160,768
  CHECK(mx.attention_params() == 41'943'040);
  CHECK(mx.expert_params() == 176'160'768);
  CHECK(mx.router_params() == 4096 * 8);
  // per layer 41,943,040 + 8·176,160,768 + 32,768 + 8,192 = 1,451,270,144; × 32 = 46,440,644,608;
  // + 2·32000·4096 + 4096 = 262,148,096
  CHECK(mx.total_params() == 46'702'792'704);
  // active per layer 41,943,040 + 2·176,160,768 + 32,768 + 8,192 = 394,305,536; × 32 + 262,148,096
  CHECK(mx.active_params() == 12'879'925'248);

  const ModelSpec& ds = preset("deepseek-v3");
  // MLA: q_a 7168·1536 = 11,010,048; q_b 1536·128·192 = 37,748,736; kv_a 7168·576 = 4,128,768;
  //      kv_b 512·128·256 = 16,777,216; o 128·128·7168 = 117,440,512
  CHECK(ds.attention_params() == 187'105'280);
  CHECK(ds.norm_params() == 2 * 7168 + 1536 + 512);
  CHECK(ds.expert_params() == 3LL * 7168 * 2048);
  CHECK(ds.shared_expert_params() == 3LL * 7168 * 2048);
  CHECK(ds.dense_ffn_params() == 3LL * 7168 * 18432);
  CHECK(ds.num_dense_layers() == 3);
  CHECK(ds.num_moe_layers() == 58);
  CHECK_FALSE(ds.is_moe_layer(2));
  CHECK(ds.is_moe_layer(3));
  CHECK(ds.weight_dtype == "fp8");

  // gpt-oss card (116.83B / 5.13B): its active count excludes the 201088·2880 input embedding.
  const ModelSpec& oss = preset("gpt-oss-120b");
  CHECK(oss.active_params() - oss.active_params_as_card() == 201088LL * 2880);
}

TEST_CASE("model layouts: a 100,000-layer interleaved model loads and counts its layers") {
  // Per-layer loops once searched dense_layers linearly (layers × dense layers; found by fuzzing).
  ModelSpec m = model_from_json(json::parse(R"({"layers":100000,"hidden":8,"attention":"gqa","heads":1,"kv_heads":1,
      "head_dim":8,"experts":2,"top_k":1,"expert_ffn":8,"moe_layer_step":2,"dense_ffn":8,"vocab":8})"),
                                "big.json");
  CHECK(m.num_moe_layers() == 50'000);
  CHECK_FALSE(m.is_moe_layer(0));
  CHECK(m.is_moe_layer(1));
  CHECK(m.is_moe_layer(99'999));
  CHECK(m.total_params() > m.active_params());
  CHECK(model_from_json(model_to_json(m), "back.json") == m);
}

TEST_CASE("model layouts: dense/MoE interleaving and first dense layers") {
  const ModelSpec& mav = preset("llama4-maverick");
  CHECK(mav.num_dense_layers() == 24);
  CHECK(mav.num_moe_layers() == 24);
  CHECK_FALSE(mav.is_moe_layer(0));  // HF: moe_layers = range(step - 1, L, step)
  CHECK(mav.is_moe_layer(1));
  CHECK(mav.is_moe_layer(47));
  const ModelSpec& kimi = preset("kimi-k2");
  CHECK(kimi.dense_layers == std::vector<int>{0});
  CHECK(preset("mixtral-8x7b").num_dense_layers() == 0);
  const ModelSpec& dense = preset("llama3-70b");
  CHECK(dense.num_moe_layers() == 0);
  CHECK(dense.dense_layers.size() == 80u);
}

TEST_CASE("model KV cache elements per token and layer") {
  CHECK(preset("llama3-70b").kv_elems_per_token_layer() == 2 * 8 * 128);  // 2048
  CHECK(preset("deepseek-v3").kv_elems_per_token_layer() == 512 + 64);    // 576, independent of heads
  CHECK(preset("kimi-k2").kv_elems_per_token_layer() == 576);
  CHECK(preset("mixtral-8x7b").kv_elems_per_token_layer() == 2048);
  CHECK(preset("llama3-70b").kv_bytes_per_token(2.0) == doctest::Approx(80.0 * 2048 * 2));  // 320 KiB
  CHECK(preset("deepseek-v3").kv_bytes_per_token(1.0) == doctest::Approx(61.0 * 576));
}

TEST_CASE("model HF import matches the presets") {
  struct Case {
    const char* file;
    const char* preset;
  };
  for (Case c : {Case{"hf-mixtral-8x7b.json", "mixtral-8x7b"}, Case{"hf-deepseek-v3.json", "deepseek-v3"},
                 Case{"hf-qwen3-30b-a3b.json", "qwen3-30b-a3b"}, Case{"hf-llama4-maverick.json", "llama4-maverick"},
                 Case{"hf-llama3-70b.json", "llama3-70b"}}) {
    INFO(c.file);
    const ModelSpec hf = hf_fixture(c.file);
    const ModelSpec& p = preset(c.preset);
    CHECK(hf.total_params() == p.total_params());
    CHECK(hf.active_params() == p.active_params());
    CHECK(hf.attention_params() == p.attention_params());
    CHECK(hf.kv_elems_per_token_layer() == p.kv_elems_per_token_layer());
    CHECK(hf.dense_layers == p.dense_layers);
    CHECK(hf.attention == p.attention);
    CHECK(hf.n_group == p.n_group);
    CHECK(hf.topk_group == p.topk_group);
    CHECK(hf.max_positions == p.max_positions);
    CHECK(hf.weight_dtype == p.weight_dtype);
  }
  CHECK(hf_fixture("hf-mixtral-8x7b.json").name == "hf-mixtral-8x7b");
  // load_model recognises an HF config by its model_type / architectures keys.
  CHECK(load_model(kData + "hf-deepseek-v3.json").total_params() == preset("deepseek-v3").total_params());
}

TEST_CASE("model HF import: unknown keys ignored, missing or bad keys named") {
  json j = parse_json(read_text_file(kData + "hf-mixtral-8x7b.json"), "m");
  j["some_future_key"] = {{"nested", true}};
  CHECK_NOTHROW(model_from_hf_config(j, "config.json"));

  auto field_of = [](const json& cfg) -> std::string {
    try {
      model_from_hf_config(cfg, "config.json");
    } catch (const InputError& e) {
      return e.field();
    }
    return "<no error>";
  };
  json missing = j;
  missing.erase("num_local_experts");
  CHECK(field_of(missing) == "/num_local_experts");
  json wrong_type = j;
  wrong_type["hidden_size"] = "4096";
  CHECK(field_of(wrong_type) == "/hidden_size");
  json too_many = j;
  too_many["num_experts_per_tok"] = 10;  // validation error re-pointed at the HF key
  CHECK(field_of(too_many) == "/num_experts_per_tok");
  json bad_gqa = j;
  bad_gqa["num_key_value_heads"] = 7;
  CHECK(field_of(bad_gqa) == "/num_key_value_heads");
  json unsupported = j;
  unsupported["model_type"] = "mamba";
  unsupported["architectures"] = {"MambaForCausalLM"};
  CHECK(field_of(unsupported) == "/model_type");
  // Only the architecture is needed when model_type is absent.
  json by_arch = j;
  by_arch.erase("model_type");
  CHECK(field_of(by_arch) == "<no error>");

  json ds = parse_json(read_text_file(kData + "hf-deepseek-v3.json"), "d");
  ds["q_lora_rank"] = nullptr;  // DeepSeek-V2-Lite style: no q compression
  const ModelSpec lite = model_from_hf_config(ds, "config.json");
  CHECK(lite.q_lora_rank == 0);
  CHECK(lite.attention_params() == 7168LL * 128 * 192 + 7168LL * 576 + 512LL * 128 * 256 + 128LL * 128 * 7168);
  ds.erase("kv_lora_rank");
  CHECK(field_of(ds) == "/kv_lora_rank");
}

TEST_CASE("model JSON round trip for every preset") {
  for (const ModelSpec& m : model_presets()) {
    INFO(m.name);
    const ModelSpec back = model_from_json(model_to_json(m), "roundtrip.json");
    CHECK(back == m);
  }
  // An irregular layout falls back to the explicit list.
  json j = small_moe();
  j["dense_layers"] = {1};  // not "first k" nor "every s-th"; {0, 2} would be moe_layer_step 2
  j["dense_ffn"] = 1024;
  const ModelSpec m = model_from_json(j, "x.json");
  CHECK(model_to_json(m).contains("dense_layers"));
  CHECK(model_from_json(model_to_json(m), "x.json") == m);
}

TEST_CASE("model validation errors name the field") {
  CHECK(error_field(small_moe()) == "<no error>");
  const ModelSpec ok = model_from_json(small_moe(), "dir/small.json");
  CHECK(ok.name == "small");
  CHECK(ok.num_moe_layers() == 4);

  auto with = [](const char* key, json value) {
    json j = small_moe();
    j[key] = std::move(value);
    return j;
  };
  CHECK(error_field(with("hidden", -4096)) == "/hidden");
  CHECK(error_text(with("hidden", -4096)).find("must be positive") != std::string::npos);
  CHECK(error_field(with("hidden", 2'000'000)) == "/hidden");
  CHECK(error_field(with("layers", 0)) == "/layers");
  CHECK(error_field(with("layers", "four")) == "/layers");
  CHECK(error_field(with("kv_heads", 3)) == "/kv_heads");
  CHECK(error_text(with("kv_heads", 3)).find("multiple of kv_heads") != std::string::npos);
  CHECK(error_field(with("top_k", 9)) == "/top_k");
  CHECK(error_text(with("top_k", 9)).find("exceeds experts") != std::string::npos);
  CHECK(error_field(with("expert_ffn", 0)) == "/expert_ffn");
  CHECK(error_field(with("dense_layers", json{0, 4})) == "/dense_layers/1");
  CHECK(error_field(with("dense_layers", json{2, 1})) == "/dense_layers/1");
  CHECK(error_field(with("dense_layers", json{0, 1, 2, 3})) == "/dense_layers");  // no MoE layer left
  CHECK(error_field(with("first_dense_layers", 9)) == "/first_dense_layers");
  CHECK(error_field(with("n_group", 3)) == "/n_group");
  CHECK(error_field(with("hiden", 256)) == "/hiden");  // unknown key
  CHECK(error_text(with("hiden", 256)).find("unknown key") != std::string::npos);
  CHECK(error_field(with("kv_lora_rank", 512)) == "/kv_lora_rank");  // MLA-only key with GQA
  CHECK(error_field(with("attention", "linear")) == "/attention");
  CHECK(error_field(with("weight_dtype", "int3")) == "/weight_dtype");
  CHECK(error_field(with("shared_experts", 1)) == "/shared_expert_ffn");  // missing width

  json dense = small_moe();
  dense.erase("experts");
  CHECK(error_field(dense) == "/top_k");  // MoE key in a dense model
  dense.erase("top_k");
  dense.erase("expert_ffn");
  CHECK(error_field(dense) == "/dense_ffn");  // dense layers need a width
  dense["dense_ffn"] = 1024;
  CHECK(error_field(dense) == "<no error>");

  json mla = small_moe();
  mla["attention"] = "mla";
  mla.erase("kv_heads");
  mla.erase("head_dim");
  mla["kv_lora_rank"] = 64;
  mla["qk_nope_head_dim"] = 32;
  mla["qk_rope_head_dim"] = 16;
  mla["v_head_dim"] = 32;
  CHECK(error_field(mla) == "<no error>");
  mla["head_dim"] = 48;
  CHECK(error_field(mla) == "/head_dim");

  // Absurd sizes that each pass their own limit but overflow together.
  json huge = small_moe();
  huge["hidden"] = 1'000'000;
  huge["expert_ffn"] = 10'000'000;
  huge["experts"] = 100'000;
  CHECK(error_text(huge).find("1e15") != std::string::npos);
}

TEST_CASE("model load_model: presets, files, unknown names") {
  CHECK(load_model("deepseek-v3") == preset("deepseek-v3"));
  try {
    load_model("mixtral-8x8b");
    FAIL("expected an error");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("unknown model preset") != std::string::npos);
    CHECK(what.find("did you mean mixtral-8x7b") != std::string::npos);
    CHECK(what.find("qwen3-235b-a22b") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
  CHECK_THROWS_AS(load_model("no/such/model.json"), InputError);
  CHECK_THROWS_AS(load_model(""), InputError);
}

TEST_CASE("model command: `shardsim models` table and --show") {
  const auto list = test::run_cli("models");
  CHECK(list.exit_code == 0);
  CHECK(list.err.empty());
  for (const ModelSpec& m : model_presets()) CHECK(list.out.find(m.name) != std::string::npos);
  CHECK(list.out.find("671.0") != std::string::npos);  // deepseek-v3 total

  const auto show = test::run_cli("models --show deepseek-v3");
  CHECK(show.exit_code == 0);
  CHECK(show.out.find("187,105,280") != std::string::npos);
  CHECK(show.out.find("576 elements") != std::string::npos);

  const auto hf = test::run_cli("models --show " + kData + "hf-mixtral-8x7b.json");
  CHECK(hf.exit_code == 0);
  CHECK(hf.out.find("46,702,792,704") != std::string::npos);

  const auto bad = test::run_cli("models --show mixtral-9x7b");
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err.find("unknown model preset") != std::string::npos);
}
