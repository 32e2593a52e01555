// studies/run_program.hpp — running a helper program (gnuplot) without a shell.
//
// Owns: run_quietly_in(), plot_png(). The program is found on PATH and started with posix_spawnp in the given
// working directory, its output discarded: nothing in the directory name or the arguments is
// interpreted (search --out once went through a shell; issue 12).
#pragma once

#include <string>
#include <vector>

namespace shardsim {

// Runs argv[0] with `dir` as its working directory; true when it exits 0.
bool run_quietly_in(const std::string& dir, const std::vector<std::string>& argv);

// Runs `gnuplot SCRIPT` in `dir`; true when it exits 0 and `dir`/`png` is a whole PNG (signature
// first, IEND chunk last). On a full disk gnuplot cut the image at 32 KiB and still exited 0; a
// cut or missing image is removed and reported as no plot.
bool plot_png(const std::string& dir, const std::string& script, const std::string& png);

}  // namespace shardsim
