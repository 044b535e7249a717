# conv_body.py - writes a Responses request whose conversation (prior
# user/assistant messages) is about SIZE bytes, ending with a user message;
# with --code, that message holds a ```python block (the offline model and
# the fake then run it once). The code_interpreter tool makes it codeshim's.
#   conv_body.py SIZE OUT [--code] [--plain]   (--plain: no code_interpreter)
import json
import sys

size, out = int(sys.argv[1]), sys.argv[2]
filler = "The quick brown fox jumps over the lazy dog; it is 1.5 m high. "
items, total, i = [], 0, 0
while total < size:
    role = "user" if i % 2 == 0 else "assistant"
    text = (filler * 16)[: min(1000, max(1, size - total))]
    item = {"role": role, "content": text}
    items.append(item)
    total += len(json.dumps(item))
    i += 1
last = "run\n```python\nprint(6 * 7)\n```" if "--code" in sys.argv else "hello"
items.append({"role": "user", "content": last})
tools = [] if "--plain" in sys.argv else [{"type": "code_interpreter", "container": {"type": "auto"}}]
tools.append({"type": "function", "name": "f", "parameters": {}})
with open(out, "w") as f:
    json.dump({"model": "m", "input": items, "tools": tools}, f)
