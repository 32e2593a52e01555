// tools/python/module.cpp — the Python module's native part, `shardsim._shardsim`: the open
// evaluator's service (studies/eval_service) behind one call, JSON text in and out, with the
// GIL released while it scores (so Python threads and the TBB workers underneath run at once).
// The Python side (tools/python/package/shardsim/__init__.py) wraps it in Problem and Study classes.
#include <memory>
#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>

#include "sim/simgrid/fidelity.hpp"
#include "common/worker_pool.hpp"
#include "studies/eval_problem.hpp"
#include "studies/eval_service.hpp"

namespace py = pybind11;

namespace {

// One service with its own SimGrid worker pool (forked at construction: create it before the
// process starts threads of its own).
class Service {
 public:
  explicit Service(int workers)
      : pool_(checked(workers) > 0 ? std::make_unique<shardsim::WorkerPool>(workers, shardsim::simgrid_worker_handler)
                                   : nullptr),
        service_(shardsim::problem_opener(pool_.get())) {}
  std::string request(const std::string& text) {
    py::gil_scoped_release unlocked;
    return service_.handle_text(text);
  }

 private:
  // As serve-evaluator's --workers: 0 (analytic only) to kMaxWorkers; 2,000 forked 2,000 processes
  // and -1 passed silently.
  static int checked(int workers) {
    if (workers < 0 || workers > shardsim::kMaxWorkers)
      throw py::value_error("workers: expected 0 (analytic only) to " + std::to_string(shardsim::kMaxWorkers) +
                            " SimGrid worker processes, got " + std::to_string(workers));
    return workers;
  }
  std::unique_ptr<shardsim::WorkerPool> pool_;
  shardsim::EvalService service_;
};

}  // namespace

PYBIND11_MODULE(_shardsim, m) {
  m.doc() = "shardsim's open evaluator (JSON requests; see docs/open-evaluator.md)";
  py::class_<Service>(m, "Service")
      .def(py::init<int>(), py::arg("workers") = 0)
      .def("request", &Service::request, py::arg("text"), "One JSON request in, its JSON reply out.");
}
