#!/usr/bin/env bash
# tests/bad_input.sh — runs the bad-input corpus through the command line.
#
# Usage: bad_input.sh SHARDSIM_BINARY CORPUS_DIR
# Every CORPUS_DIR/*.cases file holds one case per line: "<arguments> => <expected substring>"
# (blank lines and lines starting with # are skipped). Each case runs with CORPUS_DIR as the
# working directory and must exit with code 2, print exactly one line on stderr that starts with
# "error: " (or a CLI usage error) and contains the expected substring, and print nothing on stdout.
set -u
bin=$1; dir=$2
cd "$dir" || exit 1
fail=0; n=0
for f in *.cases; do
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in ''|'#'*) continue;; esac
    args=${line%% => *}; want=${line#* => }
    n=$((n+1))
    out=$(mktemp); err=$(mktemp)
    # shellcheck disable=SC2086
    eval "\"$bin\" $args" >"$out" 2>"$err"; rc=$?
    lines=$(wc -l <"$err")
    if [ "$rc" -ne 2 ]; then echo "FAIL [$f] $args: exit $rc, want 2"; cat "$err"; fail=1
    elif [ "$lines" -ne 1 ]; then echo "FAIL [$f] $args: $lines lines on stderr, want 1"; cat "$err"; fail=1
    elif ! grep -qF -- "$want" "$err"; then echo "FAIL [$f] $args: stderr lacks '$want':"; cat "$err"; fail=1
    elif [ -s "$out" ]; then echo "FAIL [$f] $args: wrote to stdout"; head -3 "$out"; fail=1
    fi
    rm -f "$out" "$err"
  done <"$f"
done
# Nothing written half-way: no temp files left behind in the corpus.
if ls ./*.tmp.* >/dev/null 2>&1; then echo "FAIL: temporary files left in $dir"; fail=1; fi
echo "bad-input corpus: $n cases"
exit $fail
