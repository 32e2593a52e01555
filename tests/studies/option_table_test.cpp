// tests/studies/option_table_test.cpp — the declared options: values checked once, JSON objects read
// whole or not at all, and the command line and the open evaluator refusing a value alike.
#include <doctest/doctest.h>

#include <string>

#include "common/input_error.hpp"
#include "studies/option_table.hpp"
#include "studies/problem_options.hpp"
#include "studies/sim_inputs.hpp"
#include "tests/cli_runner.hpp"

using namespace shardsim;

namespace {

// The reason InputError gives for reading `text` (a JSON object) into fresh SimInputs, "" if none.
std::string refusal(const std::string& text, SimInputs& in) {
  try {
    OptionReader().add(sim_option_decls(), in).read(json::parse(text), "problem");
  } catch (const InputError& e) {
    return e.field() + " " + e.reason();
  }
  return "";
}

}  // namespace

TEST_CASE("option table: a value passes its declaration's check or is refused with one reason") {
  const OptionCheck count{OptionKind::Integer, 1, 100, {}};
  CHECK(option_value_error(count, "7") == "");
  CHECK(option_value_error(count, "0") == "value 0 out of range [1, 100]");
  CHECK(option_value_error(count, "1.5") == "expected an integer, got \"1.5\"");
  CHECK(option_value_error(count, " 7") == "expected an integer, got \" 7\"");  // padding, as CLI11 let through
  CHECK(option_value_error(count, "0x10") == "expected an integer, got \"0x10\"");
  const OptionCheck rate{OptionKind::Real, 1e-9, 1e9, {}};
  CHECK(option_value_error(rate, "2.5") == "");
  CHECK(option_value_error(rate, "0") == "value 0 out of range [1e-09, 1e+09]");  // CLI11 printed the bound as 0.000000
  CHECK(option_value_error(rate, "inf") == "expected a number, got \"inf\"");
  const OptionCheck pick{OptionKind::Text, 0, -1, {"poisson", "trace"}};
  CHECK(option_value_error(pick, "trace") == "");
  CHECK(option_value_error(pick, "burst") == "expected one of poisson, trace, got \"burst\"");
  const OptionCheck seed{OptionKind::Seed, 0, -1, {}};
  CHECK(option_value_error(seed, "18446744073709551615") == "");
  CHECK(option_value_error(seed, "-1").find("expected a whole number") == 0);
  CHECK(option_value_error(seed, "18446744073709551616").find("is larger than") != std::string::npos);
}

TEST_CASE("option table: a JSON object sets the declared fields, or nothing at all") {
  SimInputs in;
  CHECK(refusal(R"({"model": "deepseek-v3", "requests": 1e3, "rate": 2, "arrivals": "trace", "seed": 7, "exact": true})", in) == "");
  CHECK(in.model == "deepseek-v3");
  CHECK(in.requests == 1000);  // JSON's 1e3 is the whole number 1000
  CHECK(in.rate == 2.0);
  CHECK(in.arrivals == "trace");
  CHECK(in.seed == 7);
  CHECK(in.exact);

  SimInputs fresh;
  CHECK(refusal(R"({"model": "deepseek-v3", "requests": 0})", fresh) == "/requests value 0 out of range [1, 10000000]");
  CHECK(fresh.model == SimInputs().model);  // refused before any field was set
  CHECK(refusal(R"({"modle": "x"})", fresh).find("/modle unknown option (expected one of: model, cluster,") == 0);
  CHECK(refusal(R"({"offline": "yes"})", fresh) == "/offline a switch: expected true or false");
  CHECK(refusal(R"({"requests": true})", fresh) == "/requests expected a value, not true/false");
  CHECK(refusal(R"({"requests": null})", fresh) == "/requests expected a string, a number or true/false, got null");
  CHECK(refusal(R"({"requests": 1.5})", fresh) == "/requests expected an integer, got \"1.5\"");
  CHECK(refusal(R"({"rate": 2, "concurrency": 3})", fresh) == "/rate --rate excludes --concurrency");
  CHECK(refusal(R"({"offline": true, "concurrency": 3})", fresh) == "/offline --offline excludes --concurrency");
  CHECK(refusal(R"({"think-time": 2})", fresh) == "/think-time --think-time requires --concurrency");
  CHECK(refusal(R"({"arrivals": "trace"})", fresh) == "/arrivals --arrivals requires --rate");
  // A switch set to false is not given: it excludes nothing.
  CHECK(refusal(R"({"offline": false, "concurrency": 3})", fresh) == "");
  CHECK(fresh.concurrency == 3);
  CHECK_FALSE(fresh.offline);
}

TEST_CASE("option table: several tables read one object, each into its own target") {
  SimInputs in;
  ProblemSettings p;
  OptionReader().add(sim_option_decls(), in).add(problem_option_decls(), p).read(
      json::parse(R"({"cluster": "dgx-h100:2", "objective": "drain", "samples": 4, "online": true})"), "problem");
  CHECK(in.cluster == "dgx-h100:2");
  CHECK(p.objective == "drain");
  CHECK(p.samples == 4);
  CHECK(p.online);
  CHECK_THROWS_AS(OptionReader().add(problem_option_decls(), p).read(json::parse(R"({"samples": 0})"), "problem"), InputError);
  CHECK_THROWS_AS(OptionReader().add(problem_option_decls(), p).read(json::parse("[1]"), "problem"), InputError);
}

TEST_CASE("option table: the command line and the open evaluator refuse a value with the same reason") {
  for (const auto& [flag, value, key] : {std::tuple<std::string, std::string, std::string>{"--requests", "0", "requests"},
                                         {"--rate", "0", "rate"},
                                         {"--routed-tokens", "-2", "routed-tokens"}}) {
    const auto cli = test::run_cli("simulate --fidelity analytic " + flag + " " + value);
    CHECK(cli.exit_code == 2);
    SimInputs in;
    const std::string reason = refusal("{\"" + key + "\": " + value + "}", in);
    REQUIRE(reason.rfind("/" + key + " ", 0) == 0);
    const std::string why = reason.substr(key.size() + 2);
    INFO(cli.err);
    CHECK(cli.err.find(flag + ": " + why) != std::string::npos);
  }
}
