// tools/cli/cmd_models.cpp — `shardsim models`: the preset table with computed vs published
// parameter counts, and `--show` for one model's full spec (preset, model JSON or HF config.json).
//
// Output: a plain-ASCII table on stdout; `--json FILE` also writes the same data as JSON
// (schema "shardsim.models/1", or "shardsim.model/1" with --show). Bad input throws InputError.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/readable_number.hpp"
#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "tools/cli/commands.hpp"
#include "workloads/model.hpp"

namespace shardsim::cli {

namespace {

struct ModelsOptions {
  std::string show;
  std::string json_out;
};

std::string (*const fmt)(const char*, double) = formatted;  // common/readable_number

// 70553706496 → "70,553,706,496".
std::string grouped(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string pct_diff(double computed, double card) {
  if (card <= 0) return "-";
  const double d = 100.0 * (computed - card) / card;
  return fmt("%+.1f%%", std::abs(d) < 0.05 ? 0.0 : d);  // never "-0.0%"
}

// [0,1,2,5,7,9] → "0-2, 5, 7, 9"; long lists are cut after `max_items` items.
std::string layer_ranges(const std::vector<int>& layers, std::size_t max_items = 8) {
  std::string out;
  std::size_t items = 0;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t k = i;
    while (k + 1 < layers.size() && layers[k + 1] == layers[k] + 1) ++k;
    if (items == max_items) {
      out += ", ... " + std::to_string(layers.back());
      break;
    }
    out += (out.empty() ? "" : ", ") + std::to_string(layers[i]);
    if (k > i) out += "-" + std::to_string(layers[k]);
    ++items;
    i = k + 1;
  }
  return out;
}

std::string experts_cell(const ModelSpec& m) {
  if (!m.is_moe()) return "dense";
  std::string s = std::to_string(m.experts);
  if (m.shared_experts > 0) s += "+" + std::to_string(m.shared_experts);
  return s + " top-" + std::to_string(m.top_k);
}

// A left-aligned first column, right-aligned numbers; widths from the content.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const {
    std::vector<std::size_t> width(rows_.front().size(), 0);
    for (const auto& r : rows_)
      for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      std::string line;
      for (std::size_t c = 0; c < rows_[i].size(); ++c) {
        const std::string& cell = rows_[i][c];
        const std::string pad(width[c] - cell.size(), ' ');
        line += c == 0 ? cell + pad : "  " + pad + cell;
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

json computed_json(const ModelSpec& m) {
  json c;
  c["total_params"] = m.total_params();
  c["active_params"] = m.active_params();
  c["active_params_as_card"] = m.active_params_as_card();
  c["dense_layers"] = m.num_dense_layers();
  c["moe_layers"] = m.num_moe_layers();
  c["attention_params_per_layer"] = m.attention_params();
  c["norm_params_per_layer"] = m.norm_params();
  c["dense_ffn_params_per_layer"] = m.dense_ffn_params();
  c["expert_params"] = m.expert_params();
  c["shared_expert_params_per_layer"] = m.shared_expert_params();
  c["router_params_per_layer"] = m.router_params();
  c["embedding_params"] = m.embedding_params();
  c["kv_elems_per_token_layer"] = m.kv_elems_per_token_layer();
  c["kv_bytes_per_token_bf16"] = m.kv_bytes_per_token(2.0);
  return c;
}

void run_list(const ModelsOptions& o) {
  Table t({"name", "layers (dense/MoE)", "hidden", "attn", "experts", "total B", "active B", "card B (tot/act)",
           "d total", "d active", "KV/token bf16"});
  json list = json::array();
  bool footnote = false;
  for (const ModelSpec& m : model_presets()) {
    std::string card = m.card_total_params > 0 ? fmt("%.4g", m.card_total_params / 1e9) : "-";
    card += " / ";
    card += m.card_active_params > 0 ? fmt("%.4g", m.card_active_params / 1e9) : "-";
    if (m.card_active_excludes_embedding) {
      card += "*";
      footnote = true;
    }
    t.add({m.name,
           std::to_string(m.layers) + " (" + std::to_string(m.num_dense_layers()) + "/" +
               std::to_string(m.num_moe_layers()) + ")",
           std::to_string(m.hidden), to_string(m.attention), experts_cell(m), fmt("%.1f", m.total_params() / 1e9),
           fmt("%.2f", m.active_params() / 1e9), card,
           pct_diff(static_cast<double>(m.total_params()), m.card_total_params),
           pct_diff(static_cast<double>(m.active_params_as_card()), m.card_active_params),
           fmt("%.1f KiB", m.kv_bytes_per_token(2.0) / 1024.0)});
    list.push_back({{"spec", model_to_json(m)}, {"computed", computed_json(m)}});
  }
  std::ostringstream out;  // printed after the JSON file is written, so a bad --json path prints nothing
  t.print(out);
  out << "\ntotal / active: parameters computed from the dims (SwiGLU = 3 matrices, RMSNorm and router weights,\n"
         "input embedding + LM head unless tied; active = top-k routed + shared experts + everything dense).\n"
         "card: published figures; d = computed vs card. KV/token: all layers, bf16 (MLA: latent + rope).\n";
  if (footnote) out << "* the card's active count leaves out the input embedding; d active compares like with like.\n";
  out << "Details: shardsim models --show NAME; format and sources: docs/model-format.md\n";
  if (!o.json_out.empty()) {
    json j = {{"schema", "shardsim.models/1"}, {"models", list}};
    write_file_atomically(o.json_out, json_text(j, 2) + "\n");
  }
  std::cout << out.str() << std::flush;
}

void run_show(const ModelsOptions& o) {
  const ModelSpec m = load_model(o.show);
  std::ostringstream out;  // printed after the JSON file is written, so a bad --json path prints nothing
  auto row = [&](const std::string& key, const std::string& value) {
    out << "  " << key << std::string(key.size() < 20 ? 20 - key.size() : 1, ' ') << value << "\n";
  };
  out << m.name << "\n";
  if (!m.comment.empty()) out << "  " << m.comment << "\n";
  out << "\nshape\n";
  std::string layers = std::to_string(m.layers);
  if (m.is_moe()) {
    layers += " (" + std::to_string(m.num_moe_layers()) + " MoE, " + std::to_string(m.num_dense_layers()) + " dense";
    if (!m.dense_layers.empty()) layers += ": " + layer_ranges(m.dense_layers);
    layers += ")";
  } else {
    layers += " (all dense)";
  }
  row("layers", layers);
  row("hidden", std::to_string(m.hidden));
  std::string attn = std::string(to_string(m.attention)) + ", " + std::to_string(m.heads) + " heads";
  if (m.attention == AttentionKind::MLA) {
    attn += "; q_lora " + std::to_string(m.q_lora_rank) + ", kv_lora " + std::to_string(m.kv_lora_rank) + ", qk " +
            std::to_string(m.qk_nope_head_dim) + " nope + " + std::to_string(m.qk_rope_head_dim) + " rope, v " +
            std::to_string(m.v_head_dim);
  } else {
    attn += " / " + std::to_string(m.kv_heads) + " kv heads, head dim " + std::to_string(m.head_dim);
  }
  row("attention", attn);
  std::string ffn = m.ffn_matrices == 3 ? "gated (SwiGLU, 3 matrices)" : "plain MLP (2 matrices)";
  if (m.dense_ffn > 0) ffn += "; dense FFN " + std::to_string(m.dense_ffn);
  row("ffn", ffn);
  if (m.is_moe()) {
    std::string e = std::to_string(m.experts) + " routed x " + std::to_string(m.expert_ffn) + ", top-" +
                    std::to_string(m.top_k);
    if (m.shared_experts > 0)
      e += "; " + std::to_string(m.shared_experts) + " shared x " + std::to_string(m.shared_expert_ffn);
    if (m.n_group > 1)
      e += "; group-limited: " + std::to_string(m.n_group) + " groups, top " + std::to_string(m.topk_group);
    row("experts", e);
  }
  row("vocab", std::to_string(m.vocab) + (m.tied_embeddings ? " (tied embeddings)" : " (untied)"));
  row("max positions", m.max_positions > 0 ? std::to_string(m.max_positions) : "unknown");
  row("weights", m.weight_dtype);

  out << "\nparameters\n";
  row("attention / layer", grouped(m.attention_params()));
  row("norms / layer", grouped(m.norm_params()));
  if (m.num_dense_layers() > 0) row("dense FFN / layer", grouped(m.dense_ffn_params()));
  if (m.is_moe()) {
    row("routed expert", grouped(m.expert_params()) + " each, " + grouped(m.experts * m.expert_params()) + " / layer");
    if (m.shared_experts > 0) row("shared experts", grouped(m.shared_expert_params()) + " / layer");
    row("router / layer", grouped(m.router_params()));
  }
  row("embeddings", grouped(m.embedding_params()) + " (input" + (m.tied_embeddings ? ", tied LM head" : " + LM head") +
                        " + final norm)");
  auto vs_card = [](double computed, double card) {
    if (card <= 0) return std::string();
    return fmt("   card %.4g B", card / 1e9) + ", " + pct_diff(computed, card);
  };
  row("total", grouped(m.total_params()) + fmt("  (%.2f B)", m.total_params() / 1e9) +
                   vs_card(static_cast<double>(m.total_params()), m.card_total_params));
  row("active / token", grouped(m.active_params()) + fmt("  (%.2f B)", m.active_params() / 1e9) +
                            vs_card(static_cast<double>(m.active_params_as_card()), m.card_active_params));
  if (m.card_active_excludes_embedding)
    row("", fmt("card counts active without the input embedding: %.2f B", m.active_params_as_card() / 1e9));

  out << "\nKV cache\n";
  row("per token, layer", std::to_string(m.kv_elems_per_token_layer()) + " elements" +
                              (m.attention == AttentionKind::MLA ? " (kv_lora + rope)" : " (2 x kv_heads x head_dim)"));
  row("per token (bf16)", grouped(static_cast<std::int64_t>(m.kv_bytes_per_token(2.0))) +
                              fmt(" bytes (%.1f KiB)", m.kv_bytes_per_token(2.0) / 1024.0));
  if (!o.json_out.empty()) {
    json j = {{"schema", "shardsim.model/1"}, {"spec", model_to_json(m)}, {"computed", computed_json(m)}};
    write_file_atomically(o.json_out, json_text(j, 2) + "\n");
  }
  std::cout << out.str() << std::flush;
}

}  // namespace

void add_models_command(CLI::App& app) {
  auto opts = std::make_shared<ModelsOptions>();
  auto* cmd = app.add_subcommand(
      "models",
      "List the model presets with parameter counts computed from their dimensions, next to the published\n"
      "(card) figures, or show one model's full spec.\n\n"
      "Examples:\n"
      "  shardsim models\n"
      "  shardsim models --show deepseek-v3\n"
      "  shardsim models --show path/to/Mixtral-8x7B-v0.1/config.json   # a Hugging Face config.json\n"
      "  shardsim models --show my-model.json --json my-model.out.json    # our model format (docs/model-format.md)\n"
      "  shardsim models --json presets.json");
  cmd->add_option("--show", opts->show, "print one model's full spec: a preset name, a model JSON or an HF config.json")
      ->type_name("NAME|FILE");
  cmd->add_option("--json", opts->json_out, "also write the listing (or the --show model) as JSON to FILE")
      ->type_name("FILE");
  cmd->callback([opts] {
    if (opts->show.empty())
      run_list(*opts);
    else
      run_show(*opts);
  });
}

}  // namespace shardsim::cli
