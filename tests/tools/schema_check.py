#!/usr/bin/python3
"""Validate JSON against a component of OpenAI's published OpenAPI schema.

The schema is the vendored copy ``tests/schema/openai/openapi.json`` (override
with the ``OPENAI_SCHEMA`` environment variable).  It is OpenAPI 3.1, so JSON Schema
draft 2020-12 applies, with these adjustments made once when it is loaded:

* OpenAPI's ``nullable: true`` becomes a real ``null`` alternative: for a
  plain typed node ``type`` gains ``"null"`` (and ``enum`` gains ``None``);
  any other node (``$ref``, ``oneOf``, ...) is wrapped as
  ``anyOf: [{type: null}, node]``.  A bare ``{"nullable": true}`` member of an
  ``allOf`` makes the whole ``allOf`` nullable.
* ``#/components/schemas/...`` references are resolved inside the same file
  (jsonschema's RefResolver, which python3-jsonschema 4.10 provides).

Special case: real streams send
``"usage": null`` inside the in-progress response of ``response.created`` /
``response.in_progress`` (and ``queued``), while the schema types ``usage`` as
an object.  ``validate(obj, "Response")`` therefore accepts ``usage: null``
when ``status`` is ``in_progress`` or ``queued``, and only then; the same
holds for the ``response`` carried by stream events.

Module API::

    validate(obj, "Response")            # raises SchemaError (an AssertionError)
    errors(obj, "Response") -> [str]     # readable messages, [] when valid
    validate_sse_responses(events)       # each event vs ResponseStreamEvent
    validate_chat_chunk(chunk)           # vs CreateChatCompletionStreamResponse

CLI: ``schema_check.py COMPONENT FILE`` (FILE ``-`` = stdin; a file holding
several JSON documents one per line is checked line by line).  Exit 0 when
valid, 1 with the messages on stderr otherwise, 2 on usage errors.
"""

import copy
import json
import os
import sys
import threading
from pathlib import Path

import jsonschema
from jsonschema import Draft202012Validator

__all__ = ["SchemaError", "validate", "errors", "validate_sse_responses",
           "validate_chat_chunk", "schema_path", "load_schema"]


class SchemaError(AssertionError):
    """Raised by validate(); the message lists every problem found."""


_LOCK = threading.Lock()
_DOC = None                 # converted openapi document
_RESOLVER = None
_VALIDATORS = {}            # component name -> validator


def schema_path():
    env = os.environ.get("OPENAI_SCHEMA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "schema" / "openai" / "openapi.json"


_NULL = {"type": "null"}
_COMBINATORS = ("$ref", "oneOf", "anyOf", "allOf", "not", "if")


def _only_nullable(node):
    """{"nullable": true} possibly with annotations only (no constraint)."""
    return isinstance(node, dict) and node.get("nullable") is True and not (
        set(node) - {"nullable", "description", "title", "default", "example",
                     "deprecated"})


def _convert(node):
    """Return a copy of node with OpenAPI nullable turned into JSON Schema."""
    if isinstance(node, list):
        return [_convert(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    allof_nullable = False
    for k, v in node.items():
        if k == "allOf" and isinstance(v, list) and any(_only_nullable(x) for x in v):
            allof_nullable = True
            v = [x for x in v if not _only_nullable(x)]
        out[k] = _convert(v) if k not in ("example", "examples", "x-oaiMeta") else v
    nullable = out.pop("nullable", None) is True
    if allof_nullable:
        nullable = True
    if not nullable:
        return out
    if "type" in out and not any(c in out for c in _COMBINATORS):
        t = out["type"]
        types = list(t) if isinstance(t, list) else [t]
        if "null" not in types:
            types.append("null")
        out["type"] = types
        if "enum" in out and None not in out["enum"]:
            out["enum"] = list(out["enum"]) + [None]
        return out
    return {"anyOf": [dict(_NULL), out]}


def load_schema():
    """The converted OpenAPI document (loaded and converted once per process)."""
    global _DOC, _RESOLVER
    with _LOCK:
        if _DOC is None:
            with open(schema_path(), "rb") as f:
                raw = json.load(f)
            doc = {"components": {"schemas": _convert(raw["components"]["schemas"])}}
            _RESOLVER = jsonschema.RefResolver(base_uri="", referrer=doc)
            _DOC = doc
        return _DOC


def _validator(component):
    load_schema()
    with _LOCK:
        v = _VALIDATORS.get(component)
        if v is None:
            if component not in _DOC["components"]["schemas"]:
                raise KeyError("no component %r in %s" % (component, schema_path()))
            v = Draft202012Validator({"$ref": "#/components/schemas/" + component},
                                     resolver=_RESOLVER)
            _VALIDATORS[component] = v
        return v


# ---------------------------------------------------------------- messages

def _where(path):
    s = "$"
    for p in path:
        s += "[%d]" % p if isinstance(p, int) else "." + str(p)
    return s


def _short(v, n=120):
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[:n] + "..."


def _leaf_errors(err, base_path=()):
    """Flatten an error into readable leaf messages.

    For anyOf/oneOf failures (the schema's discriminated unions), descend into
    the branch that the instance's "type" selects (or, without a
    discriminator, the branch of the right JSON type with the fewest errors),
    so the message names the real missing field instead of "is not valid
    under any of the given schemas"."""
    path = tuple(base_path) + tuple(err.absolute_path)
    if err.validator in ("anyOf", "oneOf") and err.context:
        groups = {}
        for sub in err.context:
            groups.setdefault(sub.schema_path[0], []).append(sub)

        def disc_error(e):
            rp = tuple(e.relative_path)
            return rp == ("type",) or (not rp and e.validator == "required"
                                       and "'type'" in e.message)

        def type_only(g):
            return len(g) == 1 and g[0].validator == "type" and not g[0].relative_path

        cands = [g for g in groups.values() if not any(disc_error(e) for e in g)]
        pick = [g for g in cands if not type_only(g)] or cands
        if pick:
            msgs = []
            for sub in min(pick, key=len):
                for m in _leaf_errors(sub):
                    if m not in msgs:
                        msgs.append(m)
            if msgs:
                return msgs
        disc = err.instance.get("type") if isinstance(err.instance, dict) else None
        if disc is not None:
            return ["%s: no schema branch accepts type %r" % (_where(path), disc)]
    msg = err.message if len(err.message) < 300 else err.message[:300] + "..."
    return ["%s: %s" % (_where(path), msg)]


def _null_usage_ok(resp):
    return (isinstance(resp, dict) and resp.get("usage", 0) is None and
            resp.get("status") in ("in_progress", "queued"))


def _prepare(obj, component):
    """Apply the documented special cases (usage: null while in progress)."""
    if component == "Response" and _null_usage_ok(obj):
        obj = dict(obj)
        del obj["usage"]
    elif isinstance(obj, dict) and isinstance(obj.get("response"), dict) and \
            _null_usage_ok(obj["response"]) and (
                component.endswith("Event") or component == "ResponseStreamEvent"):
        obj = dict(obj)
        obj["response"] = dict(obj["response"])
        del obj["response"]["usage"]
    return obj


def errors(obj, component):
    """Readable error messages ([] when obj is valid for component)."""
    v = _validator(component)
    obj = _prepare(obj, component)
    out = []
    for e in sorted(v.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        for m in _leaf_errors(e):
            if m not in out:
                out.append(m)
    return out


def validate(obj, component):
    """Raise SchemaError with readable messages unless obj is valid."""
    errs = errors(obj, component)
    if errs:
        label = component
        if isinstance(obj, dict) and isinstance(obj.get("type"), str):
            label += " (type %s)" % obj["type"]
        raise SchemaError("not a valid %s:\n  %s" % (label, "\n  ".join(errs)))
    return obj


def _as_json(x):
    if isinstance(x, (bytes, bytearray)):
        x = x.decode("utf-8")
    if isinstance(x, str):
        return json.loads(x)
    return x


def validate_sse_responses(events):
    """Validate every Responses stream event against ResponseStreamEvent.

    events: iterable of parsed dicts, JSON strings, or (event_name, data)
    pairs as returned by conftest.parse_sse.  For pairs, the event name must
    equal the JSON "type", as OpenAI sends them.  A "[DONE]" data is tolerated.
    Raises SchemaError naming the index of the first bad event."""
    n = 0
    for i, ev in enumerate(events):
        name = None
        if isinstance(ev, tuple):
            name, ev = ev
        if isinstance(ev, (str, bytes)) and _as_json_text(ev).strip() == "[DONE]":
            continue
        try:
            obj = _as_json(ev)
        except ValueError as e:
            raise SchemaError("event %d: data is not JSON (%s): %s" % (i, e, _short(ev)))
        if name is not None and name != obj.get("type"):
            raise SchemaError("event %d: SSE event name %r differs from type %r"
                              % (i, name, obj.get("type")))
        try:
            validate(obj, "ResponseStreamEvent")
        except SchemaError as e:
            raise SchemaError("event %d: %s" % (i, e)) from None
        n += 1
    return n


def _as_json_text(x):
    return x.decode("utf-8", "replace") if isinstance(x, (bytes, bytearray)) else x


def validate_chat_chunk(chunk):
    """Validate one chat.completion.chunk (dict or JSON text)."""
    obj = _as_json(chunk)
    return validate(obj, "CreateChatCompletionStreamResponse")


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: schema_check.py COMPONENT FILE\n")
        return 2
    comp, fn = argv[1], argv[2]
    data = sys.stdin.read() if fn == "-" else Path(fn).read_text()
    try:
        docs = [json.loads(data)]
    except ValueError:
        try:
            docs = [json.loads(l) for l in data.splitlines() if l.strip()]
        except ValueError as e:
            sys.stderr.write("%s: not JSON: %s\n" % (fn, e))
            return 1
    try:
        _validator(comp)
    except KeyError as e:
        sys.stderr.write("%s\n" % e.args[0])
        return 2
    bad = 0
    for i, d in enumerate(docs):
        errs = errors(d, comp)
        if errs:
            bad += 1
            pre = "" if len(docs) == 1 else "document %d: " % i
            sys.stderr.write("%snot a valid %s:\n  %s\n" % (pre, comp, "\n  ".join(errs)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
