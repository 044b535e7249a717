#!/bin/sh
# The README's first command: shows codeshim's main job. An ordinary libcurl
# program (examples/ask.c) asks a model to run Python with the
# code_interpreter tool; codeshim, preloaded, runs the code in a local
# sandbox. With OPENAI_API_KEY set it talks to OpenAI (or OPENAI_BASE_URL);
# without one it uses codeshim's built-in offline model, no network needed.
set -eu
cd "$(dirname "$0")/.."
LIB="$PWD/build/libcodeshim.so"
if [ -n "${OPENAI_API_KEY:-}" ]; then
    Q="Use the code interpreter: compute the first 12 Fibonacci numbers and their sum."
    echo "== asking ${OPENAI_BASE_URL:-https://api.openai.com/v1} (model ${OPENAI_MODEL:-gpt-4.1-mini})"
else
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
    echo "== no OPENAI_API_KEY: using codeshim's built-in offline model (CODESHIM_OFFLINE=1)"
fi
echo "== running: LD_PRELOAD=build/libcodeshim.so build/examples/ask \"...\""
LD_PRELOAD="$LIB" build/examples/ask "$Q"
