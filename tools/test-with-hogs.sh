#!/usr/bin/env bash
# Run the test suite (the README's pytest command) beside two CPU-bound processes, as on a loaded machine.
#
#   tools/test-with-hogs.sh [PYTEST_ARGS...]     e.g. tools/test-with-hogs.sh -x -k readme
#
# Exits with pytest's exit code (128+N when stopped by signal N) and prints how long pytest took.
# The hogs are stopped however the script ends (trap), and stop by themselves if it is killed outright.
# PYTHON chooses the interpreter (default: .venv/bin/python of this checkout).
set -u
cd "$(dirname "$0")/.." || exit 2
PYTHON=${PYTHON:-.venv/bin/python}
HOGS=2

hog_pids=()
pytest_pid=""
stop() {
    [ -n "$pytest_pid" ] && kill -TERM "$pytest_pid" 2>/dev/null
    for pid in "${hog_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    wait 2>/dev/null
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# CPU-bound until their parent (this script) is gone
for _ in $(seq "$HOGS"); do
    "$PYTHON" -c 'import os
parent = os.getppid()
while os.getppid() == parent:
    pass' &
    hog_pids+=("$!")
done

start=$(date +%s)
# In the background so a signal to this script is handled at once (the trap stops pytest too).
"$PYTHON" -m pytest -n 2 -q "$@" &
pytest_pid=$!
wait "$pytest_pid"
status=$?
pytest_pid=""
echo "test-with-hogs: pytest exited $status after $(( $(date +%s) - start ))s beside $HOGS CPU-bound processes" >&2
exit "$status"
