#!/bin/sh
# The README's first command: shows codeshim's main job. An ordinary libcurl
# program (examples/ask.c) asks a model to run Python with the
# code_interpreter tool; codeshim, preloaded, runs the code in a local
# sandbox. With OPENAI_API_KEY set it talks to OpenAI (or OPENAI_BASE_URL);
# without one (or with CODESHIM_OFFLINE=1) it uses codeshim's built-in
# offline model, no network needed.
#
# It builds first, quietly: the build's output is shown only when the build
# fails ($MAKE, default make, runs `all`). Then it prints the question, the
# program's output, and what to try next.
set -eu
cd "$(dirname "$0")/.."
LIB="$PWD/build/libcodeshim.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

echo "== building codeshim (make all) ..."
if ! ${MAKE:-make} --no-print-directory all >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log" >&2
    echo "== make demo: the build failed; its output is above" >&2
    exit 1
fi

if [ -n "${OPENAI_API_KEY:-}" ] && [ "${CODESHIM_OFFLINE:-0}" != 1 ]; then
    online=1
    Q="Use the code interpreter: compute the first 12 Fibonacci numbers and their sum."
    echo "== asking ${OPENAI_BASE_URL:-https://api.openai.com/v1} (model ${OPENAI_MODEL:-gpt-4.1-mini})"
else
    online=0
    export CODESHIM_OFFLINE=1
    Q='Please run this:
```python
import platform, math
print("Python", platform.python_version(), "in a codeshim sandbox")
fib = [0, 1]
while len(fib) < 12:
    fib.append(fib[-1] + fib[-2])
print(fib)
sum(fib), math.sqrt(sum(fib))
```'
    echo "== no OPENAI_API_KEY (or CODESHIM_OFFLINE=1): codeshim's built-in offline model answers"
fi
echo "== the question:"
printf '%s\n' "$Q" | sed 's/^/   | /'
echo "== running: LD_PRELOAD=build/libcodeshim.so build/examples/ask \"<the question>\""
rc=0
LD_PRELOAD="$LIB" build/examples/ask "$Q" 2>"$tmp/err" || rc=$?
cat "$tmp/err" >&2
if [ "$rc" -ne 0 ]; then
    if [ "$online" = 1 ] && grep -q "^request failed:" "$tmp/err"; then
        echo "== ${OPENAI_BASE_URL:-https://api.openai.com/v1} could not be reached (no network here?)." >&2
        cat >&2 <<'EOF'
   Run the demo offline, with codeshim's built-in model:
     CODESHIM_OFFLINE=1 make demo
     build/codeshim --offline -- build/examples/ask "$(printf 'run this:\n```python\nprint(6*7)\n```')"
EOF
    fi
    exit "$rc"
fi
cat <<'EOF'
== what to try next:
   build/codeshim --offline -- build/examples/ask --chat "$(printf 'run this:\n```python\nprint(2**100)\n```')"
   OPENAI_API_KEY=sk-... make demo              # the same with a real model
   build/codeshim --check                        # the isolation this machine gives the code
   build/codeshim -- curl ...                    # any libcurl program: see README.md "Use it"
   man doc/codeshim.1                            # every option and CODESHIM_* setting
EOF
